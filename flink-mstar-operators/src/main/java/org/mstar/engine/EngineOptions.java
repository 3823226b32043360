package org.mstar.engine;

import org.mstar.model.llama.KvCacheOptions;

/**
 * Scheduling and cache knobs of one engine.
 *
 * @param maxBatchRows most requests in one step
 * @param tokenBudget most tokens in one step; longer prefills are chunked across steps
 * @param kvCache the KV pool
 */
public record EngineOptions(int maxBatchRows, int tokenBudget, KvCacheOptions kvCache) {
    public EngineOptions {
        if (maxBatchRows < 1 || tokenBudget < 1) {
            throw new IllegalArgumentException("maxBatchRows and tokenBudget must be >= 1");
        }
    }

    /** Small defaults that suit the CPU path: 16 rows, 256 tokens a step, 512 pages of 16 tokens. */
    public static EngineOptions cpuDefaults(int maxSeqLen) {
        return new EngineOptions(16, 256, new KvCacheOptions(maxSeqLen, 512, 16, 0, true));
    }
}
