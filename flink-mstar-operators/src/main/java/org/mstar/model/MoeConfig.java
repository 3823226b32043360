package org.mstar.model;

import java.util.List;
import java.util.Objects;
import org.mstar.device.MoeRouting;

/**
 * The mixture-of-experts part of a decoder: which layers replace the dense MLP by routed experts, how many experts
 * of what width, and how the router chooses ({@link MoeRouting}).
 *
 * @param numExperts routed experts of each sparse layer ({@code num_experts}, or {@code num_local_experts})
 * @param expertIntermediateSize width I of each expert's gated MLP ({@code moe_intermediate_size}; OLMoE's
 *     {@code intermediate_size})
 * @param routing the router's rule ({@code num_experts_per_tok}, {@code norm_topk_prob}, ...)
 * @param sparseLayers one flag a layer: true where the layer's MLP is the routed experts, false where it is the dense
 *     MLP of {@code intermediate_size}
 * @param sharedIntermediateSize width of the shared experts' one dense gated MLP that every row of a sparse layer also
 *     goes through (DeepSeek-V2: {@code n_shared_experts × moe_intermediate_size}); 0 = none
 */
public record MoeConfig(int numExperts, int expertIntermediateSize, MoeRouting routing, List<Boolean> sparseLayers,
                        int sharedIntermediateSize) {

    /** Routed experts alone (OLMoE, Qwen3-MoE). */
    public MoeConfig(int numExperts, int expertIntermediateSize, MoeRouting routing, List<Boolean> sparseLayers) {
        this(numExperts, expertIntermediateSize, routing, sparseLayers, 0);
    }

    public MoeConfig {
        Objects.requireNonNull(routing, "routing");
        sparseLayers = List.copyOf(sparseLayers);
        if (numExperts < 1 || expertIntermediateSize < 1) {
            throw new ModelFormatException("num_experts and the experts' intermediate size must be > 0, got "
                    + numExperts + ", " + expertIntermediateSize);
        }
        if (sharedIntermediateSize < 0) {
            throw new ModelFormatException("the shared experts' width must be >= 0, got " + sharedIntermediateSize);
        }
        if (routing.topK() > numExperts) {
            throw new ModelFormatException("num_experts_per_tok " + routing.topK() + " exceeds num_experts "
                    + numExperts);
        }
        try {
            routing.requireFits(numExperts);
        } catch (IllegalArgumentException e) {
            throw new ModelFormatException(e.getMessage());
        }
    }

    /** Whether {@code layer}'s MLP is the routed experts. */
    public boolean sparse(int layer) {
        return sparseLayers.get(layer);
    }
}
