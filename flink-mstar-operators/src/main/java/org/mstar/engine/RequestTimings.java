package org.mstar.engine;

/**
 * Per-request timings in nanoseconds: time waiting before the first scheduled step, time to first
 * token from arrival, and the mean gap between later tokens (0 with fewer than two tokens).
 */
public record RequestTimings(long queueNanos, long timeToFirstTokenNanos, long meanInterTokenNanos, long totalNanos) {}
