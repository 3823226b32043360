package org.mstar.resources;

import java.util.List;
import java.util.Map;

/**
 * One adapter's weights on the host. Per targeted module, per layer: {@code a} holds {@code lora_A [rank, in]} and
 * {@code b} holds {@code lora_B [out, rank]}, row-major. A module the adapter does not target is absent from both
 * maps and contributes nothing. The update of a module's output is {@code scale · x · Aᵀ · Bᵀ}.
 *
 * @param scale {@code lora_alpha / rank}, or {@code lora_alpha / sqrt(rank)} for rank-stabilised LoRA
 */
public record AdapterWeights(String name, int rank, float scale, Map<String, List<float[]>> a,
                             Map<String, List<float[]>> b) {
    public AdapterWeights {
        if (rank < 1) {
            throw new IllegalArgumentException("adapter " + name + " needs a rank >= 1, got " + rank);
        }
        if (!a.keySet().equals(b.keySet())) {
            throw new IllegalArgumentException("adapter " + name + " has lora_A of " + a.keySet() + " but lora_B of "
                    + b.keySet());
        }
        a = Map.copyOf(a);
        b = Map.copyOf(b);
    }
}
