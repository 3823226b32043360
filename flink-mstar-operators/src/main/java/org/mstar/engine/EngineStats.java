package org.mstar.engine;

/**
 * Engine gauges and counters, named like the serving engines users know. {@code adapterLoads} counts adapters loaded
 * into a device slot, {@code adapterEvictions} those evicted from one for another.
 */
public record EngineStats(int running, int waiting, int kvPagesUsed, int kvPagesTotal, long prefixHitTokens,
                          long promptTokens, long generatedTokens, long preemptions, long adapterLoads,
                          long adapterEvictions) {
    /** An engine serving no adapters. */
    public EngineStats(int running, int waiting, int kvPagesUsed, int kvPagesTotal, long prefixHitTokens,
                       long promptTokens, long generatedTokens, long preemptions) {
        this(running, waiting, kvPagesUsed, kvPagesTotal, prefixHitTokens, promptTokens, generatedTokens, preemptions,
                0, 0);
    }

    public double kvUsagePercent() {
        return kvPagesTotal == 0 ? 0 : 100.0 * kvPagesUsed / kvPagesTotal;
    }
}
