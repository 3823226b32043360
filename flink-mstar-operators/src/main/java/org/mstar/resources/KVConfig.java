package org.mstar.resources;

import java.util.Map;

/**
 * The model geometry every KV storage strategy needs: what a cache holds is a checkpoint fact and
 * lives here; how it is stored (paged or ring) is storage policy and lives in a subclass.
 */
public abstract sealed class KVConfig permits PagedKVConfig, RingKVConfig {
    private final int numLayers;
    private final int unshardedKvHeads;
    private final int headDim;
    private final Integer unshardedQoHeads;
    private int numKvHeads;
    private int numQoHeads;

    protected KVConfig(int numLayers, int numKvHeads, int headDim, Integer numQoHeads) {
        if (numLayers <= 0 || numKvHeads <= 0 || headDim <= 0) {
            throw new IllegalArgumentException("numLayers, numKvHeads and headDim must be > 0");
        }
        if (numQoHeads != null && numQoHeads % numKvHeads != 0) {
            throw new IllegalArgumentException("numQoHeads (" + numQoHeads + ") must be a multiple of numKvHeads (" + numKvHeads + ")");
        }
        this.numLayers = numLayers;
        this.unshardedKvHeads = numKvHeads;
        this.headDim = headDim;
        this.unshardedQoHeads = numQoHeads;
        this.numKvHeads = numKvHeads;
        this.numQoHeads = numQoHeads == null ? numKvHeads : numQoHeads;
    }

    public int numLayers() { return numLayers; }
    public int numKvHeads() { return numKvHeads; }
    public int headDim() { return headDim; }
    /** Query heads; defaults to the KV head count. */
    public int numQoHeads() { return numQoHeads; }
    public boolean qoHeadsGiven() { return unshardedQoHeads != null; }

    /**
     * Narrow the head counts to one rank's slice, from the unsharded counts, so calling it twice
     * (KV and attention both shard the one shared config) is harmless. KV heads are replicated when
     * {@code numShards >= kvHeads}.
     */
    public final void shard(int numShards) {
        if (numShards <= 0) {
            throw new IllegalArgumentException("numShards must be > 0");
        }
        numKvHeads = numShards >= unshardedKvHeads ? 1 : unshardedKvHeads / numShards;
        int qo = unshardedQoHeads == null ? unshardedKvHeads : unshardedQoHeads;
        numQoHeads = Math.max(1, qo / numShards);
    }

    /** Patch this deployment's tunables; each storage policy names exactly what it accepts. */
    public abstract void applyYamlOverrides(Map<String, Object> overrides);
}
