package org.mstar.resources.kv.ring;

import org.mstar.device.Tensor;

/**
 * What attention reads of a ring step: per padded row, the session it addresses (padding rows park on
 * the scratch session) and its frame position (-1 for padding rows); and the step's session (the
 * first row's) as an I32 device scalar whose address never changes.
 */
public record RingKVPlan(int[] sessions, int[] framePositions, Tensor stepSession) {
    public RingKVPlan {
        if (sessions.length != framePositions.length) {
            throw new IllegalArgumentException(sessions.length + " sessions for " + framePositions.length + " frames");
        }
        sessions = sessions.clone();
        framePositions = framePositions.clone();
    }

    @Override public int[] sessions() { return sessions.clone(); }
    @Override public int[] framePositions() { return framePositions.clone(); }
}
