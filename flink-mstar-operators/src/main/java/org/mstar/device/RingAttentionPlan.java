package org.mstar.device;

/**
 * What ring attention needs for one step (frame streams): {@code segments} frames, frame s owning query
 * rows {@code [qoIndptr[s], qoIndptr[s+1])} and attending, with no mask among them, the rows
 * {@code kvRows[kvIndptr[s] .. kvIndptr[s+1])} of a ring layer buffer {@code [rows, 2, kvHeads, headDim]}
 * (index 0 of the second axis is K, 1 is V). The row lists are what the ring's visibility rule leaves:
 * the frame's own tail, so a frame attends all of itself, and the written history slots of its session.
 * All index tensors are I32 on the op's device. A frame with no visible row yields zeros.
 *
 * @param maxQoLen largest query row count of one frame, for the kernel's launch geometry
 * @param maxKvLen largest row count of one frame, for the CPU's work split
 */
public record RingAttentionPlan(int segments, Tensor qoIndptr, Tensor kvIndptr, Tensor kvRows, int totalQo,
                                int maxQoLen, int maxKvLen, float smScale) {
    public RingAttentionPlan {
        if (segments < 0 || totalQo < 0 || maxQoLen < 0 || maxKvLen < 0) {
            throw new IllegalArgumentException("ring attention plan sizes must be >= 0: segments " + segments
                    + ", totalQo " + totalQo + ", maxQoLen " + maxQoLen + ", maxKvLen " + maxKvLen);
        }
    }
}
