package org.mstar.model.whisper;

import org.mstar.device.Tensor;

/**
 * One encoder or decoder layer's weights, fused the way the forward multiplies them (d = d_model, F = ffn dim;
 * weights {@code [out, in]}, as {@code ComputeOps.matmul} takes them). Whisper's k_proj has no bias: the fused
 * biases hold zeros in its rows.
 *
 * @param selfNorm, selfNormBias {@code [d]}: LayerNorm before self-attention ({@code self_attn_layer_norm})
 * @param qkv {@code [3d, d]}: self_attn q_proj rows, then k_proj, then v_proj
 * @param qkvBias {@code [3d]}: q_proj's bias, zeros, v_proj's bias
 * @param out, outBias {@code [d, d]}, {@code [d]}: self_attn.out_proj
 * @param crossNorm, crossNormBias {@code [d]}: LayerNorm before cross-attention (decoder only, else null)
 * @param crossQ, crossQBias {@code [d, d]}, {@code [d]}: encoder_attn.q_proj (decoder only)
 * @param crossKv {@code [2d, d]}: encoder_attn k_proj rows, then v_proj (decoder only)
 * @param crossKvBias {@code [2d]}: zeros, then v_proj's bias (decoder only)
 * @param crossOut, crossOutBias {@code [d, d]}, {@code [d]}: encoder_attn.out_proj (decoder only)
 * @param mlpNorm, mlpNormBias {@code [d]}: LayerNorm before the MLP ({@code final_layer_norm})
 * @param fc1, fc1Bias {@code [F, d]}, {@code [F]}
 * @param fc2, fc2Bias {@code [d, F]}, {@code [d]}
 */
public record WhisperLayerWeights(Tensor selfNorm, Tensor selfNormBias, Tensor qkv, Tensor qkvBias, Tensor out,
                                  Tensor outBias, Tensor crossNorm, Tensor crossNormBias, Tensor crossQ,
                                  Tensor crossQBias, Tensor crossKv, Tensor crossKvBias, Tensor crossOut,
                                  Tensor crossOutBias, Tensor mlpNorm, Tensor mlpNormBias, Tensor fc1, Tensor fc1Bias,
                                  Tensor fc2, Tensor fc2Bias) {
}
