package org.mstar.device;

/**
 * The dimensions of one {@link MoeOps#moeExperts} call, checked once for every device.
 *
 * @param rows n, the rows of x and out
 * @param topK experts each row goes through
 * @param experts E, the routed experts of the stacks
 * @param hidden H
 * @param inter I, each expert's width
 * @param routedExperts the router's experts, of which the stacks hold E (fewer under expert parallelism): a row's
 *     topK choices spread over these, so an expert serves {@code rows * topK / routedExperts} rows on average
 */
public record MoeExpertsShape(int rows, int topK, int experts, int hidden, int inter, int routedExperts) {

    /** @throws IllegalArgumentException naming the tensors whose shapes or dtypes disagree */
    public static MoeExpertsShape of(Tensor x, Tensor gateUp, Tensor down, Tensor ids, Tensor weights, Tensor out) {
        if (gateUp.rank() != 3 || down.rank() != 3 || gateUp.dim(0) != down.dim(0) || gateUp.dim(1) != 2 * down.dim(2)
                || gateUp.dim(2) != down.dim(1)) {
            throw new IllegalArgumentException("moeExperts takes gateUp [E, 2I, H] and down [E, H, I], got " + gateUp
                    + " and " + down);
        }
        int hidden = (int) down.dim(1);
        int k = (int) ids.dim(-1);
        long rows = ids.numel() / k;
        if (ids.dtype() != DType.I32 || weights.dtype() != DType.F32 || weights.numel() != ids.numel()
                || x.numel() != rows * hidden || out.numel() != rows * hidden) {
            throw new IllegalArgumentException("moeExperts of x " + x + " into " + out + " needs I32 ids and F32 weights "
                    + "[n, k] of its rows, got " + ids + " and " + weights);
        }
        return new MoeExpertsShape(Math.toIntExact(rows), k, (int) gateUp.dim(0), hidden, (int) down.dim(2),
                (int) gateUp.dim(0));
    }

    /**
     * This shape for stacks that hold a slice of the router's {@code routedExperts} experts.
     *
     * @throws IllegalArgumentException when that is fewer than the stacks hold
     */
    public MoeExpertsShape ofRouted(int routedExperts) {
        if (routedExperts < experts) {
            throw new IllegalArgumentException("stacks of " + experts + " experts cannot be a slice of "
                    + routedExperts);
        }
        return new MoeExpertsShape(rows, topK, experts, hidden, inter, routedExperts);
    }
}
