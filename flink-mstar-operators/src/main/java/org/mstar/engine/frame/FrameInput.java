package org.mstar.engine.frame;

/**
 * One session's frame in a step: frame {@code framePos} ({@code tokensPerFrame} token ids) and the action that
 * conditions the prediction of the next one.
 */
public record FrameInput(String sessionId, int framePos, int[] tokens, int action) {
    public FrameInput {
        tokens = tokens.clone();
    }

    @Override public int[] tokens() { return tokens.clone(); }
}
