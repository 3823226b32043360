package org.mstar.engine;

/** Monotonic counters behind {@link EngineStats}. */
final class EngineCounters {
    long prefixHitTokens;
    long promptTokens;
    long generatedTokens;
    long preemptions;
}
