package org.mstar.resources.kv.ring;

import org.mstar.resources.RingKVLayerConfig;

/**
 * One layer's ring arithmetic. A session owns {@link #capacity()} consecutive rows of the layer's
 * buffer: {@code ringFrames} history frames, then the tail that holds the frame being computed.
 * Only the first {@code ringBuckets} history frames are ever addressed; a frame position maps to a
 * bucket at the layer's stride ({@code pinnedDilation}), and the bucket to a slot modulo the bucket count.
 */
public record RingGeometry(int tokensPerFrame, int ringFrames, int ringBuckets, int pinnedDilation) {
    public RingGeometry {
        if (tokensPerFrame <= 0) throw new IllegalArgumentException("tokens_per_frame must be > 0, got " + tokensPerFrame);
        new RingKVLayerConfig(ringFrames, ringBuckets, pinnedDilation); // the layer config's own checks
    }

    public static RingGeometry of(int tokensPerFrame, RingKVLayerConfig layer) {
        return new RingGeometry(tokensPerFrame, layer.ringFrames(), layer.ringBuckets(), layer.pinnedDilation());
    }

    /** Rows per session: the history frames plus the tail. */
    public int capacity() {
        return (ringFrames + 1) * tokensPerFrame;
    }

    /** First row of {@code session} in the layer's buffer. */
    public int sessionBase(int session) {
        return Math.multiplyExact(session, capacity());
    }

    /** {@code ceil(framePos / pinnedDilation)}: frames between two kept ones share the later one's bucket. */
    public int bucket(int framePos) {
        requireFrame(framePos);
        return (int) (((long) framePos + pinnedDilation - 1) / pinnedDilation);
    }

    /** The history slot the frame's bucket occupies. */
    public int slot(int framePos) {
        return bucket(framePos) % ringBuckets;
    }

    /** Whether the frame is kept in history at this layer's stride. */
    public boolean isWriteStep(int framePos) {
        requireFrame(framePos);
        return framePos % pinnedDilation == 0;
    }

    /** First row of the frame's history slot within {@code session}. */
    public int ringStart(int session, int framePos) {
        return sessionBase(session) + slot(framePos) * tokensPerFrame;
    }

    /** First row of the session's tail, where every frame's K/V is written. */
    public int tailStart(int session) {
        return sessionBase(session) + ringFrames * tokensPerFrame;
    }

    private static void requireFrame(int framePos) {
        if (framePos < 0) throw new IllegalArgumentException("frame_pos must be >= 0, got " + framePos);
    }
}
