package org.mstar.model.llama;

import org.mstar.device.Tensor;
import org.mstar.model.moe.MoeLayerWeights;

/**
 * One decoder layer's weights, fused the way the forward multiplies them. Shapes use H = hidden size,
 * D = head dim, Hq / Hkv = query / key-value heads, I = intermediate size; weights are {@code [out, in]}, as
 * {@code ComputeOps.matmul} takes them.
 *
 * @param inputNorm {@code [H]}: RMSNorm before attention ({@code input_layernorm})
 * @param qkvWeight {@code [(Hq + 2·Hkv)·D, H]}: q_proj rows, then k_proj, then v_proj; null under latent attention
 * @param qkvBias {@code [(Hq + 2·Hkv)·D]} in the same order (Qwen2), or null
 * @param oWeight {@code [H, Hq·D]}: o_proj; null under latent attention (its o_proj is in {@code latentAttention})
 * @param postAttentionNorm {@code [H]}: RMSNorm before the MLP ({@code post_attention_layernorm}; Gemma 3's
 *     {@code pre_feedforward_layernorm})
 * @param gateUpWeight {@code [2·I, H]}: gate_proj rows, then up_proj, the layout {@code ComputeOps.siluMul} reads;
 *     null in a layer of routed experts
 * @param downWeight {@code [H, I]}: down_proj; null in a layer of routed experts
 * @param qNorm {@code [D]}: RMSNorm of each query head ({@code q_norm}, Qwen3, Gemma 3, Qwen3-MoE), or {@code [Hq·D]}
 *     over all of them (OLMoE), or null
 * @param kNorm {@code [D]} or {@code [Hkv·D]}: RMSNorm of the keys ({@code k_norm}), as qNorm, or null
 * @param attentionOutputNorm {@code [H]}: Gemma 3's RMSNorm of the attention output before the residual add
 *     ({@code post_attention_layernorm}), or null
 * @param mlpOutputNorm {@code [H]}: Gemma 3's RMSNorm of the MLP output ({@code post_feedforward_layernorm}), or null
 * @param moe the router and experts that replace the gated MLP in a sparse layer of a mixture of experts, or null
 * @param latentAttention DeepSeek-V2's attention weights, or null for grouped-query attention
 */
public record LlamaLayerWeights(Tensor inputNorm, Tensor qkvWeight, Tensor qkvBias, Tensor oWeight,
                                Tensor postAttentionNorm, Tensor gateUpWeight, Tensor downWeight, Tensor qNorm,
                                Tensor kNorm, Tensor attentionOutputNorm, Tensor mlpOutputNorm, MoeLayerWeights moe,
                                LatentAttentionWeights latentAttention) {
}
