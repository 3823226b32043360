package org.mstar.device;

/**
 * How a mixture-of-experts router turns one row of router logits into its experts and their weights, the rule of
 * Hugging Face's MoE models: scores from the logits ({@link Scoring}); when {@code numGroups > 1}, DeepSeek-V2's
 * {@code group_limited_greedy}: the experts are split into {@code numGroups} equal groups in index order, a group's
 * score is its best expert's score, and only the experts of the {@code topkGroups} best groups stay candidates;
 * then the {@code topK} best candidates (ties to the lower index), their scores as weights, divided by their sum when
 * {@code normTopkProb}, then multiplied by {@code routedScalingFactor}. (That is DeepSeek-V3's order; DeepSeek-V2's
 * reference code scales only weights it does not normalise, which is the same for its checkpoints: they do not
 * normalise.)
 *
 * @param scoring how logits become scores
 * @param topK experts a row is sent to ({@code num_experts_per_tok})
 * @param normTopkProb whether the chosen weights are divided by their sum ({@code norm_topk_prob})
 * @param numGroups expert groups ({@code n_group}); 1 = no group limit
 * @param topkGroups groups a row may choose its experts from ({@code topk_group}); equal to numGroups without a limit
 * @param routedScalingFactor factor on every weight after the optional normalisation ({@code routed_scaling_factor})
 */
public record MoeRouting(Scoring scoring, int topK, boolean normTopkProb, int numGroups, int topkGroups,
                         float routedScalingFactor) {

    /** How router logits become scores. */
    public enum Scoring {
        /** Softmax over all experts in fp32 (OLMoE, Qwen3-MoE, DeepSeek-V2). */
        SOFTMAX,
        /** Each logit's sigmoid on its own. */
        SIGMOID
    }

    public MoeRouting {
        if (scoring == null || topK < 1 || numGroups < 1 || topkGroups < 1 || topkGroups > numGroups
                || !(routedScalingFactor > 0)) {
            throw new IllegalArgumentException("MoE routing needs a scoring, top_k >= 1, 1 <= topk_group <= n_group "
                    + "and routed_scaling_factor > 0, got " + scoring + ", " + topK + ", " + topkGroups + ", "
                    + numGroups + ", " + routedScalingFactor);
        }
    }

    /** Plain top-k of the softmax scores (OLMoE, Qwen3-MoE), normalised when {@code normTopkProb}. */
    public static MoeRouting softmaxTopK(int topK, boolean normTopkProb) {
        return new MoeRouting(Scoring.SOFTMAX, topK, normTopkProb, 1, 1, 1f);
    }

    /** Experts of each group: {@code experts / numGroups}. */
    public int groupSize(int experts) {
        return experts / numGroups;
    }

    /**
     * The rows of one {@link MoeOps#moeRoute} call: F32 {@code logits [n, E]} into I32 {@code ids} and F32
     * {@code weights} {@code [n, topK]}.
     *
     * @throws IllegalArgumentException naming the tensors when they disagree, or as {@link #requireFits}
     */
    public int routedRows(Tensor logits, Tensor ids, Tensor weights) {
        int experts = (int) logits.dim(-1);
        long rows = logits.numel() / experts;
        requireFits(experts);
        if (logits.dtype() != DType.F32 || ids.dtype() != DType.I32 || weights.dtype() != DType.F32
                || ids.numel() != rows * topK || weights.numel() != rows * topK) {
            throw new IllegalArgumentException("moeRoute takes F32 logits [n, E] into I32 ids and F32 weights [n, "
                    + topK + "], got " + logits + ", " + ids + ", " + weights);
        }
        return Math.toIntExact(rows);
    }

    /**
     * @throws IllegalArgumentException when {@code experts} cannot be routed this way: not split evenly into the
     *     groups, or fewer candidates than {@code topK}
     */
    public void requireFits(int experts) {
        if (experts % numGroups != 0 || topkGroups * groupSize(experts) < topK) {
            throw new IllegalArgumentException("MoE routing of " + experts + " experts in " + numGroups
                    + " groups, choosing " + topK + " of the " + topkGroups + " best groups: the groups must be equal "
                    + "and hold at least top_k experts");
        }
    }
}
