package org.mstar.device;

/**
 * What a ragged (cacheless, varlen) attention kernel needs for one plan label: {@code rows} spans, span r
 * owning query rows {@code [qIndptr[r], qIndptr[r+1])} of q and key/value rows
 * {@code [kvIndptr[r], kvIndptr[r+1])} of k and v (cu_seqlens style, I32 on the op's device). A self-attention
 * plan has equal query and key spans; a cross-attention plan pairs one span of queries with another span of
 * keys of the same request.
 *
 * <p>The mask is {@code causalBlock}: {@link #FULL} (0) lets every query see its whole key span; a block of
 * {@code B >= 1} lets query i of a span, at position {@code p = kvLen - qLen + i} (queries align to the end of
 * the keys), see keys {@code [0, min(kvLen, (p / B + 1) · B))}: its own block and every earlier one.
 * {@link #CAUSAL} (1) is the plain causal mask. A span with no keys yields zeros.
 *
 * @param totalQ   query rows the plan covers ({@code qIndptr[rows]}); rows of q past it are not touched
 * @param totalKv  key rows the plan covers ({@code kvIndptr[rows]})
 * @param maxQLen  largest query span; with {@code maxKvLen} it bounds the grid a kernel launches
 * @param maxKvLen largest key span
 */
public record RaggedAttentionPlan(int rows, Tensor qIndptr, Tensor kvIndptr, int totalQ, int totalKv, int maxQLen,
                                  int maxKvLen, int causalBlock, float smScale) {
    /** Every query sees its whole key span (bidirectional, cross). */
    public static final int FULL = 0;
    /** Query i sees keys up to its own position. */
    public static final int CAUSAL = 1;

    public RaggedAttentionPlan {
        if (rows < 0 || totalQ < 0 || totalKv < 0 || maxQLen < 0 || maxKvLen < 0) {
            throw new IllegalArgumentException("ragged plan sizes must be >= 0");
        }
        if (causalBlock < 0) {
            throw new IllegalArgumentException("causalBlock must be FULL (0) or a block size >= 1, got " + causalBlock);
        }
    }

    /** One past the last key query {@code i} of a span of {@code qLen} queries over {@code kvLen} keys may see. */
    public int visibleEnd(int qLen, int kvLen, int i) {
        if (causalBlock == FULL) {
            return kvLen;
        }
        long p = (long) kvLen - qLen + i;
        if (p < 0) {
            return 0;
        }
        return (int) Math.min(kvLen, (p / causalBlock + 1) * causalBlock);
    }
}
