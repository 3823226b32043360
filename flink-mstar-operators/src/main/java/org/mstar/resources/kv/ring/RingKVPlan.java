package org.mstar.resources.kv.ring;

/**
 * What attention reads of a ring step: per padded row, the session it addresses (padding rows park on
 * the scratch session) and its frame position (-1 for padding rows).
 */
public record RingKVPlan(int[] sessions, int[] framePositions) {
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
