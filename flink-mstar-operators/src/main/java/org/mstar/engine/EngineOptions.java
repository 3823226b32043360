package org.mstar.engine;

import org.mstar.model.llama.KvCacheOptions;

/**
 * Scheduling, cache and adapter knobs of one engine.
 *
 * @param maxBatchRows most requests in one step
 * @param tokenBudget most tokens in one step; longer prefills are chunked across steps
 * @param kvCache the KV pool
 * @param decodeGraphs replay decode steps as device graphs per batch bucket (see {@code DecodeGraphs});
 *                     prefill and mixed steps stay eager
 * @param scheduling the scheduler's policy and fairness bound
 * @param role which part of a request's life the engine serves (disaggregated serving); default colocated
 * @param preplan with decode graphs, plan each decode step while the device runs the one before (see
 *                {@code DecodePreplan}); default on
 * @param launchAhead with pre-planning, enqueue a pre-planned decode step before the host has accepted the step
 *                    before it, feeding that step's tokens on the device; default on
 * @param adapters the per-request LoRA adapters served, or null for none (a request naming one then gets a 400)
 */
public record EngineOptions(int maxBatchRows, int tokenBudget, KvCacheOptions kvCache, boolean decodeGraphs,
                            SchedulerOptions scheduling, EngineRole role, boolean preplan, boolean launchAhead,
                            AdapterOptions adapters) {
    public EngineOptions {
        if (maxBatchRows < 1 || tokenBudget < 1) {
            throw new IllegalArgumentException("maxBatchRows and tokenBudget must be >= 1");
        }
        if (scheduling == null) {
            throw new IllegalArgumentException("scheduler options are required");
        }
        if (role == null) {
            throw new IllegalArgumentException("an engine role is required");
        }
        if (role != EngineRole.COLOCATED && kvCache.windowedLayerPages() > 0) {
            throw new IllegalArgumentException("a prefill-to-decode hand-off carries one KV cache; a separate "
                    + "windowed-layer cache is only for colocated engines");
        }
    }

    /** Without adapters. */
    public EngineOptions(int maxBatchRows, int tokenBudget, KvCacheOptions kvCache, boolean decodeGraphs,
                         SchedulerOptions scheduling, EngineRole role, boolean preplan, boolean launchAhead) {
        this(maxBatchRows, tokenBudget, kvCache, decodeGraphs, scheduling, role, preplan, launchAhead, null);
    }

    /** Launched ahead where pre-planned. */
    public EngineOptions(int maxBatchRows, int tokenBudget, KvCacheOptions kvCache, boolean decodeGraphs,
                         SchedulerOptions scheduling, EngineRole role, boolean preplan) {
        this(maxBatchRows, tokenBudget, kvCache, decodeGraphs, scheduling, role, preplan, true);
    }

    /** Decode steps pre-planned (when decode graphs are on). */
    public EngineOptions(int maxBatchRows, int tokenBudget, KvCacheOptions kvCache, boolean decodeGraphs,
                         SchedulerOptions scheduling, EngineRole role) {
        this(maxBatchRows, tokenBudget, kvCache, decodeGraphs, scheduling, role, true);
    }

    /** Colocated. */
    public EngineOptions(int maxBatchRows, int tokenBudget, KvCacheOptions kvCache, boolean decodeGraphs,
                         SchedulerOptions scheduling) {
        this(maxBatchRows, tokenBudget, kvCache, decodeGraphs, scheduling, EngineRole.COLOCATED);
    }

    /** With the default scheduler options. */
    public EngineOptions(int maxBatchRows, int tokenBudget, KvCacheOptions kvCache, boolean decodeGraphs) {
        this(maxBatchRows, tokenBudget, kvCache, decodeGraphs, SchedulerOptions.DEFAULTS);
    }

    /** Without decode graphs, with the default scheduler options. */
    public EngineOptions(int maxBatchRows, int tokenBudget, KvCacheOptions kvCache) {
        this(maxBatchRows, tokenBudget, kvCache, false);
    }

    public EngineOptions withDecodeGraphs(boolean on) {
        return new EngineOptions(maxBatchRows, tokenBudget, kvCache, on, scheduling, role, preplan, launchAhead,
                adapters);
    }

    public EngineOptions withScheduling(SchedulerOptions s) {
        return new EngineOptions(maxBatchRows, tokenBudget, kvCache, decodeGraphs, s, role, preplan, launchAhead,
                adapters);
    }

    public EngineOptions withRole(EngineRole r) {
        return new EngineOptions(maxBatchRows, tokenBudget, kvCache, decodeGraphs, scheduling, r, preplan, launchAhead,
                adapters);
    }

    public EngineOptions withPreplan(boolean on) {
        return new EngineOptions(maxBatchRows, tokenBudget, kvCache, decodeGraphs, scheduling, role, on, launchAhead,
                adapters);
    }

    public EngineOptions withLaunchAhead(boolean on) {
        return new EngineOptions(maxBatchRows, tokenBudget, kvCache, decodeGraphs, scheduling, role, preplan, on,
                adapters);
    }

    public EngineOptions withKvCache(KvCacheOptions kv) {
        return new EngineOptions(maxBatchRows, tokenBudget, kv, decodeGraphs, scheduling, role, preplan, launchAhead,
                adapters);
    }

    public EngineOptions withAdapters(AdapterOptions a) {
        return new EngineOptions(maxBatchRows, tokenBudget, kvCache, decodeGraphs, scheduling, role, preplan,
                launchAhead, a);
    }

    /** Small defaults that suit the CPU path: 16 rows, 256 tokens a step, 512 pages of 16 tokens. */
    public static EngineOptions cpuDefaults(int maxSeqLen) {
        return new EngineOptions(16, 256, KvCacheOptions.builder().maxSeqLen(maxSeqLen).maxNumPages(512).build());
    }
}
