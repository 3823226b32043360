package org.mstar.device;

/**
 * A mixture-of-experts layer's sparse part: the router's choice and the routed experts' gated MLPs with their
 * weighted combine. One family of {@link ComputeOps}. The router logits come from a {@link ProjectionOps#matmul}
 * with the router weight, and shared experts (a dense gated MLP added to the routed output) from the dense ops.
 *
 * <p>{@code ids} I32 {@code [n, topK]} and {@code weights} F32 {@code [n, topK]} pass from {@link #moeRoute} to
 * {@link #moeExperts} on the device, so a recorded graph serves whatever experts a later step chooses.
 */
public interface MoeOps {

    /**
     * Each row's experts and weights from {@code logits} F32 {@code [n, E]}, as {@link MoeRouting} defines them, into
     * {@code ids} I32 {@code [n, topK]} (best first) and {@code weights} F32 {@code [n, topK]}.
     */
    void moeRoute(Tensor logits, MoeRouting routing, Tensor ids, Tensor weights);

    /**
     * {@code out[i] = Σ_j weights[i, j] · down_e · (silu(gate_e · x[i]) ⊙ (up_e · x[i]))} with {@code e = ids[i, j]},
     * over the {@code topK} columns of {@code ids} in order; an id of -1 (an expert on another device,
     * {@link #moeLocalIds}) contributes nothing. x {@code [n, H]}; {@code gateUp [E, 2I, H]} (expert e's
     * gate_proj rows, then its up_proj rows); {@code down [E, H, I]}; out {@code [n, H]}. The gate and up sums and the
     * activation are rounded to out's dtype (as {@link FusedDecodeOps#gateUpActivation} does), each expert's down sum
     * stays fp32, and the weighted sum is rounded once to out's dtype.
     */
    void moeExperts(Tensor x, Tensor gateUp, Tensor down, Tensor ids, Tensor weights, Tensor out);

    /**
     * {@link #moeExperts} on a device whose stacks hold a slice of the router's {@code routedExperts} experts (expert
     * parallelism, {@code localIds} from {@link #moeLocalIds}): the same sums. The count tells the device how many
     * rows an expert serves on average, which picks how it computes them: each row's choices spread over all routed
     * experts, not over this device's.
     */
    default void moeExpertsSlice(Tensor x, Tensor gateUp, Tensor down, Tensor localIds, Tensor weights,
                                 int routedExperts, Tensor out) {
        moeExperts(x, gateUp, down, localIds, weights, out);
    }

    /**
     * Expert parallelism: a device holding experts {@code [first, first + count)} of the router's numbering renumbers
     * {@code ids} I32 {@code [n, topK]} into {@code local} I32 {@code [n, topK]}: {@code ids - first} where the expert
     * is one of its own, -1 where another device holds it, so that {@link #moeExperts} over the device's slice of the
     * experts adds its own experts' share of each row.
     */
    void moeLocalIds(Tensor ids, int first, int count, Tensor local);
}
