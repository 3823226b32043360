package org.mstar.model.llama;

import java.util.List;
import java.util.Map;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.model.LatentAttention;
import org.mstar.model.ModelConfig;

/**
 * One layer's latent attention weights (DeepSeek-V2), as the checkpoint stores them. Shapes use H = hidden size,
 * Hq = heads, Q = q_lora_rank, R = kv_lora_rank, Dn / Dr / Dv = the nope, rope and value head dims; weights are
 * {@code [out, in]}.
 *
 * @param qProj {@code [Hq·(Dn + Dr), H]}: {@code q_proj}, or null when the query has a low-rank bottleneck
 * @param qAProj {@code [Q, H]}: {@code q_a_proj}, or null without a bottleneck
 * @param qANorm {@code [Q]}: {@code q_a_layernorm}, or null without a bottleneck
 * @param qBProj {@code [Hq·(Dn + Dr), Q]}: {@code q_b_proj}, or null without a bottleneck
 * @param kvAProj {@code [R + Dr, H]}: {@code kv_a_proj_with_mqa} (the latent, then the shared rope key part)
 * @param kvANorm {@code [R]}: {@code kv_a_layernorm}
 * @param kvBProj {@code [Hq, Dn + Dv, R]}: {@code kv_b_proj}, viewed per head as {@code LatentAttentionOps} takes it
 * @param oProj {@code [H, Hq·Dv]}: {@code o_proj}
 */
public record LatentAttentionWeights(Tensor qProj, Tensor qAProj, Tensor qANorm, Tensor qBProj, Tensor kvAProj,
                                     Tensor kvANorm, Tensor kvBProj, Tensor oProj) {

    /** Allocates one layer's tensors (weights in {@code dtype}, norms in {@code norms}), adding them to {@code owned}. */
    static LatentAttentionWeights allocate(ModelConfig c, List<Tensor> owned, Device device, DType dtype, DType norms) {
        LatentAttention m = c.latentAttention().orElseThrow();
        long h = c.hiddenSize();
        long heads = c.numHeads();
        long q = heads * m.qkHeadDim();
        boolean lowRank = m.qLoraRank() > 0;
        return new LatentAttentionWeights(
                lowRank ? null : LlamaWeights.allocate(owned, device, dtype, q, h),
                lowRank ? LlamaWeights.allocate(owned, device, dtype, m.qLoraRank(), h) : null,
                lowRank ? LlamaWeights.allocate(owned, device, norms, m.qLoraRank()) : null,
                lowRank ? LlamaWeights.allocate(owned, device, dtype, q, m.qLoraRank()) : null,
                LlamaWeights.allocate(owned, device, dtype, m.latentDim(), h),
                LlamaWeights.allocate(owned, device, norms, m.kvLoraRank()),
                LlamaWeights.allocate(owned, device, dtype, heads, m.qkNopeHeadDim() + m.vHeadDim(), m.kvLoraRank()),
                LlamaWeights.allocate(owned, device, dtype, h, heads * m.vHeadDim()));
    }

    /** Puts each tensor under its Hugging Face name, {@code prefix} being the layer's {@code ...self_attn.}. */
    void putHfTensors(String prefix, Map<String, Tensor> m) {
        if (qProj != null) {
            m.put(prefix + "q_proj.weight", qProj);
        } else {
            m.put(prefix + "q_a_proj.weight", qAProj);
            m.put(prefix + "q_a_layernorm.weight", qANorm);
            m.put(prefix + "q_b_proj.weight", qBProj);
        }
        m.put(prefix + "kv_a_proj_with_mqa.weight", kvAProj);
        m.put(prefix + "kv_a_layernorm.weight", kvANorm);
        m.put(prefix + "kv_b_proj.weight", kvBProj.reshape(kvBProj.dim(0) * kvBProj.dim(1), kvBProj.dim(2)));
        m.put(prefix + "o_proj.weight", oProj);
    }
}
