package org.mstar.resources;

/** A stream grows by {@code tokensPerIteration} on every iteration of loop {@code loop}. */
public record LoopGrowth(String loop, int tokensPerIteration) {}
