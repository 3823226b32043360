package org.mstar.engine.frame;

/**
 * The frame a step predicted for a session: frame {@code framePos} (its input's position + 1), its tokens, and
 * their logits {@code [tokensPerFrame * vocab]} when the step kept them (null otherwise).
 */
public record FrameResult(String sessionId, int framePos, int[] tokens, float[] logits) {
}
