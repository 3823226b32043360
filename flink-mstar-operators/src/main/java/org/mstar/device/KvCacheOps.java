package org.mstar.device;

/**
 * Writing keys and values into the paged KV pool, RoPE on the way, and moving whole pages (prefix forks, host
 * offload). One family of {@link ComputeOps}.
 */
public interface KvCacheOps {

    /**
     * Rotate {@code q [n, qHeads, headDim]} and {@code k [n, kHeads, headDim]} (or q alone, k null) in place at positions
     * {@code posIds} (I32 {@code [n]}), as {@link RopeParams} defines. Angles are computed as
     * {@code pos · invFreq} in fp32 from the fp32-rounded table.
     */
    void rope(Tensor q, Tensor k, Tensor posIds, RopeParams params);

    /**
     * Write token i's K and V ({@code [n, kvHeads, headDim]}) into {@code pool[layer, pageIdx[i], 0|1,
     * offsets[i]]}. Index tensors are I32 {@code [n]}.
     */
    void kvAppend(Tensor pool, int layer, Tensor k, Tensor v, Tensor pageIdx, Tensor offsets);

    /**
     * The fused {@link ProjectionOps#splitQkv} → {@link #rope} → {@link #kvAppend} of one layer (one pass instead of
     * three small kernels): from {@code qkv [n, (qHeads + 2·kvHeads)·headDim]} it writes the rotated q to {@code q [n,
     * qHeads, headDim]} and the rotated k and the v straight into {@code pool[layer, pageIdx[i], 0|1, offsets[i]]};
     * kvHeads and headDim come from the pool. Equal, element for element, to splitting into {@code q} and into k and v
     * of qkv's dtype, rotating q and k at {@code posIds} (I32 {@code [n]}) and appending k and v. Index tensors are I32
     * {@code [n]}.
     */
    void qkvRopeAppend(Tensor qkv, Tensor posIds, RopeParams params, Tensor pool, int layer, Tensor pageIdx,
            Tensor offsets, Tensor q);

    /**
     * {@link #qkvRopeAppend} with an RMSNorm of every q and k head between the split and the rotation (q_norm and
     * k_norm of Qwen3, Qwen3-MoE and Gemma 3: one weight {@code [headDim]} each, shared by the heads). Equal, element
     * for element, to splitting {@code qkv} into {@code q} and into k and v of qkv's dtype, {@link NormOps#rmsNorm} of
     * each q head with {@code qNorm} and each k head with {@code kNorm} in place (each head a row), rotating q and k at
     * {@code posIds} and appending k and v.
     */
    void qkNormRopeAppend(Tensor qkv, Tensor qNorm, Tensor kNorm, float eps, Tensor posIds, RopeParams params,
            Tensor pool, int layer, Tensor pageIdx, Tensor offsets, Tensor q);

    /** Copy whole pages {@code src[i] → dst[i]} in every layer and plane (I32 index tensors). */
    void copyPages(Tensor pool, Tensor src, Tensor dst);

    /** {@code out [layers, n, planes, pageSize, kvHeads, headDim] = pool[:, pages[i]]}, either pool layout. */
    void gatherPages(Tensor pool, Tensor pages, Tensor out);

    /** Inverse of {@link #gatherPages}: {@code pool[:, pages[i]] = in[:, i]}. */
    void scatterPages(Tensor pool, Tensor pages, Tensor in);
}
