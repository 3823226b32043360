package org.mstar.resources;

/** Which slot (and captured bucket, when replaying a graph) a step plans into and replays. */
public record SlotLease(int slot, BucketKey bucket) {}
