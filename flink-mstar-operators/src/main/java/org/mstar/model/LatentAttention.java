package org.mstar.model;

/**
 * DeepSeek-V2's multi-head latent attention (MLA), as config.json declares it. Each token's keys and values are
 * compressed into one latent of {@code kv_lora_rank} values plus a {@code qk_rope_head_dim}-wide key part that RoPE
 * rotates and every head shares; each head's query is {@code qk_nope_head_dim + qk_rope_head_dim} wide and its value
 * {@code v_head_dim}.
 *
 * @param qLoraRank {@code q_lora_rank}: width of the query's low-rank bottleneck ({@code q_a_proj}, {@code
 *     q_a_layernorm}, {@code q_b_proj}); 0 when the query is one {@code q_proj} (null in config.json)
 * @param kvLoraRank {@code kv_lora_rank}, R: width of the compressed latent
 * @param qkNopeHeadDim {@code qk_nope_head_dim}, Dn: the part of each query and key head without RoPE
 * @param qkRopeHeadDim {@code qk_rope_head_dim}, Dr: the rotated part, shared by every head's key
 * @param vHeadDim {@code v_head_dim}, Dv
 */
public record LatentAttention(int qLoraRank, int kvLoraRank, int qkNopeHeadDim, int qkRopeHeadDim, int vHeadDim) {

    public LatentAttention {
        if (qLoraRank < 0 || kvLoraRank <= 0 || qkNopeHeadDim <= 0 || qkRopeHeadDim <= 0 || vHeadDim <= 0) {
            throw new ModelFormatException("q_lora_rank must be >= 0 (0 = none) and kv_lora_rank, qk_nope_head_dim, "
                    + "qk_rope_head_dim, v_head_dim > 0, got " + qLoraRank + ", " + kvLoraRank + ", " + qkNopeHeadDim
                    + ", " + qkRopeHeadDim + ", " + vHeadDim);
        }
        if (qkRopeHeadDim % 2 != 0) {
            throw new ModelFormatException("qk_rope_head_dim must be even (RoPE rotates pairs), got " + qkRopeHeadDim);
        }
    }

    /** Dn + Dr: width of each query head, whose inverse square root scales the attention scores. */
    public int qkHeadDim() {
        return qkNopeHeadDim + qkRopeHeadDim;
    }

    /** R + Dr: the values one token stores per layer in the KV cache. */
    public int latentDim() {
        return kvLoraRank + qkRopeHeadDim;
    }
}
