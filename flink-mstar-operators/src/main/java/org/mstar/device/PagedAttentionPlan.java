package org.mstar.device;

/**
 * What a paged attention kernel needs for one plan label (FlashInfer's layout): {@code rows} sequences,
 * sequence r owning query rows {@code [qoIndptr[r], qoIndptr[r+1])} and pages
 * {@code kvIndices[kvIndptr[r] .. kvIndptr[r+1])}, the last holding {@code lastPageLen[r]} ∈ [1, pageSize]
 * tokens. All index tensors are I32 on the op's device. Queries align to the end of their sequence:
 * query i of r sits at absolute position {@code kvLen(r) - qLen(r) + i}.
 *
 * <p>Masks: {@code causal} lets a query see keys up to its own position (false: the whole sequence);
 * {@code windowLeft >= 0} further limits it to keys at positions {@code >= pos - windowLeft}
 * ({@code -1} = unlimited); {@code contextOnly} hides this step's own tokens (keys at positions
 * {@code >= kvLen - qLen}). A sequence whose visible key set is empty yields zeros.
 *
 * @param maxQoLen largest {@code qLen} in the batch; {@code maxQoLen == 1} selects the decode kernel
 */
public record PagedAttentionPlan(int rows, Tensor qoIndptr, Tensor kvIndptr, Tensor kvIndices, Tensor lastPageLen,
                                 int pageSize, int totalQo, int maxQoLen, int maxKvLen, boolean causal,
                                 int windowLeft, boolean contextOnly, float smScale) {
    public boolean isDecode() {
        return maxQoLen == 1;
    }

    /** Frees the four index tensors, for a plan that owns them (not static buffers a captured graph reads). */
    public void closeIndexTensors() {
        qoIndptr.close();
        kvIndptr.close();
        kvIndices.close();
        lastPageLen.close();
    }
}
