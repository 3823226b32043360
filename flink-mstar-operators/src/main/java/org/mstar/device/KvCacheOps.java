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

    /** Copy whole pages {@code src[i] → dst[i]} in every layer and plane (I32 index tensors). */
    void copyPages(Tensor pool, Tensor src, Tensor dst);

    /** {@code out [layers, n, planes, pageSize, kvHeads, headDim] = pool[:, pages[i]]}, either pool layout. */
    void gatherPages(Tensor pool, Tensor pages, Tensor out);

    /** Inverse of {@link #gatherPages}: {@code pool[:, pages[i]] = in[:, i]}. */
    void scatterPages(Tensor pool, Tensor pages, Tensor in);
}
