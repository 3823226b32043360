package org.mstar.model.llama;

import org.mstar.device.Tensor;

/**
 * One decoder layer's weights, fused the way the forward multiplies them. Shapes use H = hidden size,
 * D = head dim, Hq / Hkv = query / key-value heads, I = intermediate size; weights are {@code [out, in]}, as
 * {@code ComputeOps.matmul} takes them.
 *
 * @param inputNorm {@code [H]}: RMSNorm before attention ({@code input_layernorm})
 * @param qkvWeight {@code [(Hq + 2·Hkv)·D, H]}: q_proj rows, then k_proj, then v_proj
 * @param qkvBias {@code [(Hq + 2·Hkv)·D]} in the same order (Qwen2), or null
 * @param oWeight {@code [H, Hq·D]}: o_proj
 * @param postAttentionNorm {@code [H]}: RMSNorm before the MLP ({@code post_attention_layernorm})
 * @param gateUpWeight {@code [2·I, H]}: gate_proj rows, then up_proj, the layout {@code ComputeOps.siluMul} reads
 * @param downWeight {@code [H, I]}: down_proj
 */
public record LlamaLayerWeights(Tensor inputNorm, Tensor qkvWeight, Tensor qkvBias, Tensor oWeight,
                                Tensor postAttentionNorm, Tensor gateUpWeight, Tensor downWeight) {
}
