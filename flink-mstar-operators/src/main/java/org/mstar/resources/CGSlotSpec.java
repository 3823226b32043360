package org.mstar.resources;

/** One (bucket, slot) a captured graph will replay in; {@code config} is the capture config. */
public record CGSlotSpec(BucketKey bucket, int slot, Object config, Integer configIdx) {
    public int bs() { return bucket.bs(); }
    public int numTokens() { return bucket.numTokens(); }
}
