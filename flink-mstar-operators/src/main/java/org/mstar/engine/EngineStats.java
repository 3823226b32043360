package org.mstar.engine;

/** Engine gauges and counters, named like the serving engines users know. */
public record EngineStats(int running, int waiting, int kvPagesUsed, int kvPagesTotal, long prefixHitTokens,
                          long promptTokens, long generatedTokens, long preemptions) {
    public double kvUsagePercent() {
        return kvPagesTotal == 0 ? 0 : 100.0 * kvPagesUsed / kvPagesTotal;
    }
}
