package org.mstar.model.moe;

import java.util.LinkedHashMap;
import java.util.Map;
import org.mstar.device.Tensor;

/**
 * One sparse layer's MLP weights: the router and the stacked routed experts, plus optional shared experts. E = routed
 * experts, I = an expert's width, H = hidden size; weights are {@code [out, in]} as {@code ComputeOps.matmul} takes
 * them.
 *
 * @param router {@code [E, H]}: {@code mlp.gate.weight}
 * @param gateUp {@code [E, 2I, H]}: expert e's gate_proj rows, then its up_proj rows, the layout of transformers 5's
 *     fused {@code mlp.experts.gate_up_proj}
 * @param down {@code [E, H, I]}: each expert's down_proj ({@code mlp.experts.down_proj} fused)
 * @param shared the dense gated MLP every row also goes through, its output added to the routed one; null for none
 */
public record MoeLayerWeights(Tensor router, Tensor gateUp, Tensor down, SharedExperts shared) {

    /**
     * Shared experts as one dense gated MLP of width S (DeepSeek's {@code n_shared_experts} experts side by side).
     *
     * @param gateUp {@code [2S, H]}: gate rows, then up rows
     * @param down {@code [H, S]}
     */
    public record SharedExperts(Tensor gateUp, Tensor down) {}

    /**
     * The router's, the shared experts' ({@code shared_experts.gate_proj.weight}, ...) and the routed experts' tensors
     * under their Hugging Face names below {@code prefix} (e.g. {@code model.layers.3.mlp.}), as views: routed experts
     * per expert ({@code experts.{e}.gate_proj.weight}, ..., as checkpoints are
     * published) unless {@code fused} ({@code experts.gate_up_proj} and {@code experts.down_proj}, as transformers 5
     * holds them).
     */
    public Map<String, Tensor> hfTensors(String prefix, boolean fused) {
        Map<String, Tensor> m = new LinkedHashMap<>();
        m.put(prefix + "gate.weight", router);
        if (shared != null) {
            long width = shared.down().dim(1);
            m.put(prefix + "shared_experts.gate_proj.weight", shared.gateUp().rows(0, width));
            m.put(prefix + "shared_experts.up_proj.weight", shared.gateUp().rows(width, width));
            m.put(prefix + "shared_experts.down_proj.weight", shared.down());
        }
        if (fused) {
            m.put(prefix + "experts.gate_up_proj", gateUp);
            m.put(prefix + "experts.down_proj", down);
            return m;
        }
        long experts = gateUp.dim(0);
        long inter = down.dim(2);
        long hidden = down.dim(1);
        Tensor gateUpRows = gateUp.reshape(experts * 2 * inter, hidden);
        Tensor downRows = down.reshape(experts * hidden, inter);
        for (long e = 0; e < experts; e++) {
            String p = prefix + "experts." + e + ".";
            m.put(p + "gate_proj.weight", gateUpRows.rows(e * 2 * inter, inter));
            m.put(p + "up_proj.weight", gateUpRows.rows(e * 2 * inter + inter, inter));
            m.put(p + "down_proj.weight", downRows.rows(e * hidden, hidden));
        }
        return m;
    }
}
