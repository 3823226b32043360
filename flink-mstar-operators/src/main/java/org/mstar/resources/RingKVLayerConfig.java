package org.mstar.resources;

/** One layer's ring geometry; layers may hold frames at different strides. */
public record RingKVLayerConfig(int ringFrames, int ringBuckets, int pinnedDilation) {
    public RingKVLayerConfig {
        if (ringFrames < 1) throw new IllegalArgumentException("ring_frames must be >= 1, got " + ringFrames);
        if (ringBuckets < 1 || ringBuckets > ringFrames) {
            throw new IllegalArgumentException("ring_buckets must be in [1, ring_frames=" + ringFrames + "], got " + ringBuckets);
        }
        if (pinnedDilation < 1) throw new IllegalArgumentException("pinned_dilation must be >= 1, got " + pinnedDilation);
    }
}
