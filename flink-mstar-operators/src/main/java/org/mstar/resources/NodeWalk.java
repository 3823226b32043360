package org.mstar.resources;

/** A (graph node, graph walk) pair, the key of per-walk label maps. */
public record NodeWalk(String node, String walk) {}
