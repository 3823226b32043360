package org.mstar.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.mstar.device.MoeRouting;

/**
 * The config.json keys of the mixture-of-experts architectures (OLMoE, Qwen3-MoE), with transformers' defaults for
 * absent keys. Honoured: {@code num_experts} (Qwen3-MoE's files may say {@code num_local_experts}),
 * {@code num_experts_per_tok}, {@code norm_topk_prob}, and for Qwen3-MoE {@code moe_intermediate_size},
 * {@code decoder_sparse_step} and {@code mlp_only_layers}. Refused by name: OLMoE's {@code clip_qkv} when set and
 * Qwen3-MoE's {@code use_sliding_window} when true. {@code output_router_logits} and {@code router_aux_loss_coef} only
 * add the load-balancing loss in training, so they are ignored.
 */
final class MoeConfigJson {
    /** transformers' OlmoeConfig and Qwen3MoeConfig defaults. */
    private static final int OLMOE_DEFAULT_EXPERTS = 64;
    private static final int QWEN3_MOE_DEFAULT_EXPERTS = 128;
    private static final int DEFAULT_TOP_K = 8;
    private static final int QWEN3_MOE_DEFAULT_WIDTH = 768;

    private MoeConfigJson() {}

    /** The MoE part of an OLMoE or Qwen3-MoE config.json; null for the dense architectures. */
    static MoeConfig parse(ConfigFields f, Architecture arch) {
        if (arch != Architecture.OLMOE && arch != Architecture.QWEN3_MOE) {
            return null;
        }
        int layers = f.requiredInt("num_hidden_layers");
        boolean qwen = arch == Architecture.QWEN3_MOE;
        int experts = experts(f, qwen ? QWEN3_MOE_DEFAULT_EXPERTS : OLMOE_DEFAULT_EXPERTS);
        MoeRouting routing = MoeRouting.softmaxTopK(f.optInt("num_experts_per_tok", DEFAULT_TOP_K),
                f.optBoolean("norm_topk_prob", false));
        if (!qwen) {
            if (f.has("clip_qkv")) {
                throw f.error("clip_qkv " + f.get("clip_qkv") + " is not supported (OLMoE checkpoints set it to null)");
            }
            return new MoeConfig(experts, f.requiredInt("intermediate_size"), routing, sparse(layers, 1, Set.of()));
        }
        if (f.optBoolean("use_sliding_window", false)) {
            throw f.error("use_sliding_window=true is not supported for " + arch.hfName());
        }
        int step = f.optInt("decoder_sparse_step", 1);
        if (step < 1) {
            throw f.error("decoder_sparse_step must be >= 1, got " + step);
        }
        return new MoeConfig(experts, f.optInt("moe_intermediate_size", QWEN3_MOE_DEFAULT_WIDTH), routing,
                sparse(layers, step, mlpOnlyLayers(f, layers)));
    }

    /** num_experts, or num_local_experts (the name transformers 5 writes for Qwen3-MoE); both must agree. */
    private static int experts(ConfigFields f, int absent) {
        int experts = f.optInt("num_experts", f.optInt("num_local_experts", absent));
        if (f.has("num_experts") && f.has("num_local_experts") && f.optInt("num_local_experts", 0) != experts) {
            throw f.error("num_experts " + experts + " and num_local_experts " + f.get("num_local_experts")
                    + " disagree");
        }
        return experts;
    }

    private static Set<Integer> mlpOnlyLayers(ConfigFields f, int layers) {
        Set<Integer> dense = new HashSet<>();
        JsonNode list = f.get("mlp_only_layers");
        if (list == null) {
            return dense;
        }
        if (!list.isArray()) {
            throw f.error("'mlp_only_layers' must be a list of layer indices, got " + list);
        }
        for (JsonNode l : list) {
            if (!l.canConvertToInt() || l.intValue() < 0 || l.intValue() >= layers) {
                throw f.error("mlp_only_layers names layer " + l + ", outside [0, " + layers + ")");
            }
            dense.add(l.intValue());
        }
        return dense;
    }

    /** Qwen3-MoE's rule: a layer is sparse unless listed as dense, where (layer + 1) is a multiple of the step. */
    private static List<Boolean> sparse(int layers, int step, Set<Integer> dense) {
        List<Boolean> sparse = new ArrayList<>();
        for (int l = 0; l < layers; l++) {
            sparse.add(!dense.contains(l) && (l + 1) % step == 0);
        }
        return sparse;
    }

    /** Writes the keys {@link #parse} reads back to an equal {@link MoeConfig}. */
    static void write(ObjectNode o, Architecture arch, MoeConfig moe) {
        o.put("num_experts", moe.numExperts());
        o.put("num_experts_per_tok", moe.routing().topK());
        o.put("norm_topk_prob", moe.routing().normTopkProb());
        if (arch == Architecture.OLMOE) {
            o.putNull("clip_qkv");
            return;
        }
        o.put("moe_intermediate_size", moe.expertIntermediateSize());
        o.put("decoder_sparse_step", 1);
        var dense = o.putArray("mlp_only_layers");
        for (int l = 0; l < moe.sparseLayers().size(); l++) {
            if (!moe.sparse(l)) {
                dense.add(l);
            }
        }
    }
}
