package org.mstar.model.mamba;

/**
 * How the prefix cache keeps a {@link HybridModel}'s recurrent states: a snapshot of a request's whole state (every
 * Mamba2 layer's SSM state and convolution window) every {@code interval} tokens of its prompt, at most {@code slots}
 * of them on the device, least recently used evicted. Only while the KV cache's prefix cache is on.
 *
 * @param interval tokens between snapshots, rounded up to a whole number of KV pages
 * @param slots    snapshots kept at most; each takes as much device memory as a request's state
 */
public record StateSnapshots(int interval, int slots) {
    /** A snapshot every 128 tokens, so that shared prefixes from 128 tokens on hit. */
    public static final int DEFAULT_INTERVAL = 128;

    public StateSnapshots {
        if (interval < 1 || slots < 1) {
            throw new IllegalArgumentException("state snapshots need an interval and slots >= 1, got " + interval
                    + " and " + slots);
        }
    }

    /** A snapshot every {@link #DEFAULT_INTERVAL} tokens, as many kept as requests hold a state at once. */
    public static StateSnapshots defaults(int stateSlots) {
        return new StateSnapshots(DEFAULT_INTERVAL, stateSlots);
    }

    /** The interval rounded up to a whole number of pages of {@code pageSize} tokens. */
    int intervalIn(int pageSize) {
        return (interval + pageSize - 1) / pageSize * pageSize;
    }
}
