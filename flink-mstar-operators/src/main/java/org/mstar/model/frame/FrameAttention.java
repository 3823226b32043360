package org.mstar.model.frame;

import org.mstar.device.Tensor;

/**
 * How a frame model's layer keeps K/V and attends: the engine's ring, or a test's dense reference. Rows are
 * the step's frames in order, {@code tokensPerFrame} each; keys arrive rotated, so history is never re-rotated.
 */
public interface FrameAttention {
    /**
     * Keep this step's {@code k} and {@code v} ({@code [n, kvHeads, headDim]}) of {@code layer}, then write to
     * {@code out} ({@code [n, heads, headDim]}) the attention of {@code q} over what each frame sees.
     */
    void attend(int layer, Tensor q, Tensor k, Tensor v, Tensor out);
}
