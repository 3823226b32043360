package org.mstar.model.frame;

/**
 * A frame forward's result: the next frame's tokens of every input frame, {@code [frames * tokensPerFrame]},
 * greedy (argmax, lowest id on ties); and their logits {@code [frames * tokensPerFrame * vocab]} when asked for.
 */
public record FrameOutput(int[] tokens, float[] logits) {
}
