package org.mstar.device;

/**
 * Attention, each kind run from a plan built once per step (its metadata): paged attention over the KV pool, ragged
 * (cacheless) attention, and frames over a ring buffer with its append. One family of {@link ComputeOps}.
 */
public interface AttentionOps {

    /**
     * Paged attention of {@code q [totalQo, qoHeads, headDim]} against layer {@code layer} of the pool,
     * as {@code plan} lays it out; grouped-query heads map query head h to KV head
     * {@code h / (qoHeads / kvHeads)}. Writes {@code out [totalQo, qoHeads, headDim]}.
     */
    void pagedAttention(Tensor q, Tensor pool, int layer, PagedAttentionPlan plan, Tensor out);

    /**
     * Refuses a head dim {@link #pagedAttention} cannot run with a KV pool of {@code dtype}, so a model is rejected
     * where it is built instead of at its first step. Every head dim by default.
     *
     * @throws UnsupportedOnDeviceException naming the head dims this device runs
     */
    default void requireAttentionHeadDim(int headDim, DType dtype) {
    }

    /**
     * Varlen attention with no KV cache: span r of {@code plan} attends queries {@code q[qIndptr[r] ..
     * qIndptr[r+1])} against keys and values {@code k, v[kvIndptr[r] .. kvIndptr[r+1])} under the plan's mask
     * ({@link RaggedAttentionPlan}). q {@code [≥ totalQ, qoHeads, headDim]}, k and v {@code [≥ totalKv, kvHeads,
     * headDim]}, out of q's shape and dtype; grouped-query heads map query head h to KV head
     * {@code h / (qoHeads / kvHeads)}. Rows of {@code out} past {@code totalQ} are not written.
     */
    void raggedAttention(Tensor q, Tensor k, Tensor v, RaggedAttentionPlan plan, Tensor out);

    /**
     * Refuses a head dim {@link #raggedAttention} cannot run in {@code dtype}, so a model is rejected where it is
     * built. Every head dim by default.
     *
     * @throws UnsupportedOnDeviceException naming the head dims this device runs
     */
    default void requireRaggedAttentionHeadDim(int headDim, DType dtype) {
    }

    /**
     * Attention of frames over a ring layer buffer {@code ring [rows, 2, kvHeads, headDim]}: query rows of
     * frame s ({@code q [totalQo, qoHeads, headDim]}) attend the buffer rows {@code plan} lists for it, all of
     * them (a frame sees itself whole, and its session's visible history); grouped-query heads map query head
     * h to KV head {@code h / (qoHeads / kvHeads)}. Scores {@code smScale · (q · k)}, softmax in fp32. Writes
     * {@code out [totalQo, qoHeads, headDim]}.
     */
    void ringAttention(Tensor q, Tensor ring, RingAttentionPlan plan, Tensor out);

    /**
     * Write token i's K and V ({@code [n, kvHeads, headDim]}) into rows {@code rows[i]} (I32 {@code [n]}) of a ring
     * layer buffer {@code [rows, 2, kvHeads, headDim]}: index 0 of the second axis takes K, 1 takes V.
     */
    void ringAppend(Tensor k, Tensor v, Tensor ring, Tensor rows);
}
