package org.mstar.model.llama;

import org.mstar.model.ModelConfig;
import org.mstar.model.MoeConfig;

/**
 * How a Llama-family model splits over the {@code degree} devices of one engine (Megatron-style tensor parallelism,
 * and expert parallelism for the sparse layers): each rank holds {@code heads} query heads and {@code kvHeads}
 * key-value heads (q/k/v column-parallel, o row-parallel), {@code intermediate} columns of the gated MLP (gate/up
 * column-parallel, down row-parallel), {@code experts} whole routed experts (router replicated) and {@code shared}
 * columns of the shared experts' MLP, and a contiguous range of the vocabulary's LM head rows (the last ranks one
 * row fewer when the degree does not divide it). Embeddings and norms are replicated.
 *
 * @param degree devices in the group; 1 is the single-device model
 */
public record ShardLayout(int degree, int heads, int kvHeads, int headDim, int intermediate, int experts, int shared,
                          int vocab) {

    /**
     * The layout of {@code config} over {@code degree} devices.
     *
     * @throws IllegalArgumentException naming what the degree does not divide (key-value heads are split, never
     *     replicated), or the attention that is not sharded (DeepSeek-V2's latent attention, OLMoE's q/k norms over
     *     every head)
     */
    public static ShardLayout of(ModelConfig config, int degree) {
        if (degree < 1) {
            throw new IllegalArgumentException("tensor parallel degree must be >= 1, got " + degree);
        }
        String model = config.architecture().hfName();
        int experts = config.moe().map(MoeConfig::numExperts).orElse(0);
        int shared = config.moe().map(MoeConfig::sharedIntermediateSize).orElse(0);
        if (degree > 1) {
            if (config.latentAttention().isPresent()) {
                throw new IllegalArgumentException("tensor parallel " + degree + ": " + model
                        + "'s latent attention is not sharded; it runs on one device");
            }
            if (config.qkNorm() && (config.qNormSize() != config.headDim() || config.kNormSize() != config.headDim())) {
                throw new IllegalArgumentException("tensor parallel " + degree + ": " + model
                        + "'s q/k norms span every head, so its heads cannot be split");
            }
            requireDivides(degree, config.numKvHeads(), "key-value heads (num_key_value_heads)", model);
            requireDivides(degree, config.numHeads(), "query heads (num_attention_heads)", model);
            requireDivides(degree, config.intermediateSize(), "MLP columns (intermediate_size)", model);
            requireDivides(degree, experts, "routed experts", model);
            requireDivides(degree, shared, "shared experts' columns", model);
        }
        return new ShardLayout(degree, config.numHeads() / degree, config.numKvHeads() / degree, config.headDim(),
                config.intermediateSize() / degree, experts / degree, shared / degree, config.vocabSize());
    }

    private static void requireDivides(int degree, int count, String what, String model) {
        if (count % degree != 0) {
            throw new IllegalArgumentException("tensor parallel " + degree + " does not divide the " + count + " "
                    + what + " of " + model);
        }
    }

    /** One rank's query width, Hq/N·D. */
    public int qSize() {
        return heads * headDim;
    }

    /** One rank's width of each of k and v, Hkv/N·D. */
    public int kvSize() {
        return kvHeads * headDim;
    }

    /** The first LM head row (vocabulary id) rank {@code rank} computes. */
    public int vocabFirst(int rank) {
        return (int) ((long) vocab * rank / degree);
    }

    /** The LM head rows rank {@code rank} computes. */
    public int vocabCount(int rank) {
        return vocabFirst(rank + 1) - vocabFirst(rank);
    }

    /** The first routed expert (the router's numbering) rank {@code rank} holds. */
    public int expertFirst(int rank) {
        return experts * rank;
    }
}
