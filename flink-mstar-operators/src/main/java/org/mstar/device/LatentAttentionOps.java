package org.mstar.device;

/**
 * Multi-head latent attention (DeepSeek-V2's MLA) over a latent KV pool {@code [layers, pages, 1, pageSize, 1, R + Dr]}:
 * per token and layer one row holding the compressed latent (R = {@code kv_lora_rank}, after {@code kv_a_layernorm})
 * followed by the RoPE'd key part (Dr = {@code qk_rope_head_dim}); the latent serves as both key and value. Queries
 * attend in the latent space: the key up-projection is absorbed into the query ({@link #latentQuery}) and the value
 * up-projection applied to the attention's latent output ({@link #latentValues}), so no per-head K or V is ever
 * materialised. One family of {@link ComputeOps}.
 *
 * <p>{@code kvB} is {@code kv_b_proj}'s weight viewed {@code [H, Dn + Dv, R]}: per head h, rows {@code [0, Dn)} are
 * the key up-projection W_UK[h] and rows {@code [Dn, Dn + Dv)} the value up-projection W_UV[h].
 */
public interface LatentAttentionOps {

    /**
     * Writes token i's latent row into {@code pool[layer, pageIdx[i], 0, offsets[i]]}: the first R values of
     * {@code kvA [n, R + Dr]} RMS-normalised with {@code kvNorm [R]} and {@code eps}, then its last Dr values rotated
     * at {@code posIds[i]} as {@code rope} defines ({@code rope.rotaryDim() == Dr}). Index tensors are I32 {@code [n]}.
     */
    void latentAppend(Tensor kvA, Tensor kvNorm, float eps, Tensor posIds, RopeParams rope, Tensor pool, int layer,
                      Tensor pageIdx, Tensor offsets);

    /**
     * The latent query of {@code q [n, H, Dn + Dr]} into {@code qLatent [n, H, R + Dr]}: its first R values per head
     * are {@code q[n, h, :Dn] · W_UK[h]} (the key up-projection absorbed), its last Dr the rope part
     * {@code q[n, h, Dn:]} rotated at {@code posIds} (I32 {@code [n]}).
     */
    void latentQuery(Tensor q, Tensor kvB, Tensor posIds, RopeParams rope, Tensor qLatent);

    /**
     * Attention of {@code qLatent [totalQo, H, R + Dr]} over layer {@code layer} of the latent pool, as {@code plan}
     * lays it out (its masks and {@code smScale}): scores {@code smScale · (qLatent · row)} over each visible key's
     * whole row, softmax in fp32, and {@code out [totalQo, H, R]} the weighted sum of the rows' first R values (the
     * latent), zeros where no key is visible.
     */
    void latentAttention(Tensor qLatent, Tensor pool, int layer, PagedAttentionPlan plan, Tensor out);

    /** {@code out [n, H, Dv]} = per head, {@code latent [n, H, R]} times W_UV[h]ᵀ (the value up-projection). */
    void latentValues(Tensor latent, Tensor kvB, Tensor out);
}
