package org.mstar.model;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.mstar.device.MoeRouting;

/**
 * The config.json keys DeepSeek-V2 adds to the Llama ones, with transformers 5's DeepseekV2Config defaults for absent
 * keys. Every key is honoured or refused by name: its attention keys ({@link LatentAttention}), and its mixture-of-
 * experts keys ({@link MoeConfig}): layers from {@code first_k_dense_replace} on are sparse, their routed experts
 * chosen from the softmax scores by {@code topk_method} ({@code greedy}, or {@code group_limited_greedy} over
 * {@code n_group} groups of which {@code topk_group} stay), weighted by their scores times
 * {@code routed_scaling_factor}, plus {@code n_shared_experts} shared experts as one dense MLP. Keys that change
 * nothing at inference are accepted as they are: initializer_range, the router's training loss ({@code aux_loss_alpha},
 * {@code seq_aux}) and {@code ep_size} (how many processes DeepSeek's own code splits the experts over; one process
 * holds them all here).
 */
final class DeepseekV2Json {
    private static final int DEFAULT_Q_LORA_RANK = 1536;
    private static final int DEFAULT_KV_LORA_RANK = 512;
    private static final int DEFAULT_ROPE_HEAD_DIM = 64;
    private static final int DEFAULT_NOPE_HEAD_DIM = 128;
    private static final int DEFAULT_V_HEAD_DIM = 128;
    private static final int DEFAULT_ROUTED_EXPERTS = 64;
    private static final int DEFAULT_SHARED_EXPERTS = 2;
    private static final int DEFAULT_EXPERT_WIDTH = 1407;
    private static final String GREEDY = "greedy";
    private static final String GROUP_LIMITED = "group_limited_greedy";

    /** The mixture-of-experts keys: they describe the sparse layers, so a dense checkpoint's values change nothing. */
    private static final Set<String> MOE_KEYS = Set.of("n_routed_experts", "n_shared_experts", "num_experts_per_tok",
            "moe_intermediate_size", "routed_scaling_factor", "topk_method", "n_group", "topk_group", "norm_topk_prob",
            "moe_layer_freq", "scoring_func", "aux_loss_alpha", "seq_aux", "ep_size");

    /** The Llama keys this architecture has, its attention's keys, and keys that change nothing at inference. */
    private static final Set<String> ATTENTION_AND_LLAMA_KEYS = Set.of("architectures", "model_type", "hidden_size",
            "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
            "hidden_act", "rms_norm_eps",
            "rope_theta", "rope_scaling", "rope_parameters", "max_position_embeddings", "vocab_size",
            "tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype",
            "attention_bias", "mlp_bias", "attention_dropout", "initializer_range", "use_cache", "pretraining_tp",
            "transformers_version", "auto_map", "quantization_config", "q_lora_rank", "kv_lora_rank",
            "qk_nope_head_dim", "qk_rope_head_dim", "qk_head_dim", "v_head_dim", "first_k_dense_replace");

    private static final Set<String> KNOWN = union(ATTENTION_AND_LLAMA_KEYS, MOE_KEYS);

    private DeepseekV2Json() {}

    private static Set<String> union(Set<String> a, Set<String> b) {
        Set<String> all = new HashSet<>(a);
        all.addAll(b);
        return Set.copyOf(all);
    }

    /** Checks every key and sets the latent attention and the head dim on {@code b}. */
    static void read(ConfigFields f, ModelConfig.Builder b) {
        f.refuseUnknownKeys(KNOWN);
        int layers = f.requiredInt("num_hidden_layers");
        int firstSparse = f.optInt("first_k_dense_replace", 0);
        if (firstSparse < layers) {
            b.moe(experts(f, layers, Math.max(firstSparse, 0)));
        }
        if (f.optInt("pretraining_tp", 1) != 1) {
            throw f.error("pretraining_tp " + f.get("pretraining_tp") + " is not supported (only 1)");
        }
        LatentAttention mla = new LatentAttention(
                f.hasKey("q_lora_rank") ? f.optInt("q_lora_rank", 0) : DEFAULT_Q_LORA_RANK,
                f.optInt("kv_lora_rank", DEFAULT_KV_LORA_RANK),
                f.optInt("qk_nope_head_dim", DEFAULT_NOPE_HEAD_DIM),
                f.optInt("qk_rope_head_dim", DEFAULT_ROPE_HEAD_DIM),
                f.optInt("v_head_dim", DEFAULT_V_HEAD_DIM));
        int qkHeadDim = f.optInt("qk_head_dim", mla.qkHeadDim());
        if (qkHeadDim != mla.qkHeadDim()) {
            throw f.error("qk_head_dim " + qkHeadDim + " is not qk_nope_head_dim + qk_rope_head_dim = "
                    + mla.qkHeadDim());
        }
        // transformers builds the RoPE table from head_dim, which its config sets to qk_rope_head_dim
        b.latentAttention(mla).headDim(f.optInt("head_dim", mla.qkRopeHeadDim()));
    }

    /**
     * The sparse layers' experts. Refused by name where transformers 5 and DeepSeek's reference code (whose keys the
     * published checkpoints carry) would compute different models, or where neither can: {@code moe_layer_freq} other
     * than 1 (transformers ignores it, DeepSeek's code makes only every n-th layer sparse), {@code norm_topk_prob}
     * true (transformers ignores it and scales; DeepSeek's code normalises and does not scale), a
     * {@code scoring_func} other than softmax, another {@code topk_method}, and {@code n_shared_experts} null
     * (transformers always adds the shared experts).
     */
    private static MoeConfig experts(ConfigFields f, int layers, int firstSparse) {
        if (f.optInt("moe_layer_freq", 1) != 1) {
            throw f.error("moe_layer_freq " + f.get("moe_layer_freq") + " is not supported (only 1: transformers 5 "
                    + "makes every layer from first_k_dense_replace on sparse, DeepSeek's code every moe_layer_freq-th)");
        }
        String scoring = f.optString("scoring_func", "softmax");
        if (!scoring.equals("softmax")) {
            throw f.error("scoring_func '" + scoring + "' is not supported (DeepSeek-V2 scores experts by softmax)");
        }
        if (f.optBoolean("norm_topk_prob", false)) {
            throw f.error("norm_topk_prob=true is not supported: transformers 5 ignores it and scales the weights by "
                    + "routed_scaling_factor, DeepSeek's code normalises them instead; published checkpoints say false");
        }
        if (f.hasKey("n_shared_experts") && !f.has("n_shared_experts")) {
            throw f.error("n_shared_experts null is not supported (transformers 5 always adds the shared experts)");
        }
        if (!f.has("num_experts_per_tok")) {
            throw f.error("missing required key 'num_experts_per_tok' (layers from first_k_dense_replace "
                    + firstSparse + " on are sparse)");
        }
        int topK = f.optInt("num_experts_per_tok", 0);
        String method = f.optString("topk_method", GREEDY);
        int groups = 1;
        int keptGroups = 1;
        if (method.equals(GROUP_LIMITED)) {
            groups = f.requiredInt("n_group");
            keptGroups = f.requiredInt("topk_group");
        } else if (!method.equals(GREEDY)) {
            throw f.error("topk_method '" + method + "' is not supported (only " + GREEDY + " and " + GROUP_LIMITED
                    + ")");
        }
        int width = f.optInt("moe_intermediate_size", DEFAULT_EXPERT_WIDTH);
        int shared = f.optInt("n_shared_experts", DEFAULT_SHARED_EXPERTS);
        if (shared < 0) {
            throw f.error("n_shared_experts must be >= 0, got " + shared);
        }
        MoeRouting routing;
        try {
            routing = new MoeRouting(MoeRouting.Scoring.SOFTMAX, topK, false, groups, keptGroups,
                    (float) f.optDouble("routed_scaling_factor", 1.0));
        } catch (IllegalArgumentException e) {
            throw f.error("num_experts_per_tok, n_group, topk_group, routed_scaling_factor: " + e.getMessage());
        }
        List<Boolean> sparse = new ArrayList<>();
        for (int l = 0; l < layers; l++) {
            sparse.add(l >= firstSparse);
        }
        return new MoeConfig(f.optInt("n_routed_experts", DEFAULT_ROUTED_EXPERTS), width, routing, sparse,
                shared * width);
    }

    /**
     * @throws ModelFormatException when DeepSeek-V2's config.json cannot say {@code moe}: sparse layers other than all
     *     from some layer on, sigmoid scores, normalised weights, or shared experts not a whole number of experts wide
     */
    static void requireExpressible(MoeConfig moe) {
        int first = moe.sparseLayers().indexOf(true);
        boolean suffix = first >= 0 && !moe.sparseLayers().subList(first, moe.sparseLayers().size()).contains(false);
        MoeRouting r = moe.routing();
        if (!suffix || r.scoring() != MoeRouting.Scoring.SOFTMAX || r.normTopkProb()
                || moe.sharedIntermediateSize() % moe.expertIntermediateSize() != 0) {
            throw new ModelFormatException("DeepSeek-V2's experts are softmax-scored, not normalised, sparse in every "
                    + "layer from first_k_dense_replace on, and n_shared_experts whole experts wide, got " + moe);
        }
    }

    /** The DeepSeek-V2 keys of {@code c}: its latent attention, and its experts when some layer is sparse. */
    static void write(ModelConfig c, ObjectNode o) {
        LatentAttention m = c.latentAttention().orElseThrow();
        if (m.qLoraRank() > 0) {
            o.put("q_lora_rank", m.qLoraRank());
        } else {
            o.putNull("q_lora_rank");
        }
        o.put("kv_lora_rank", m.kvLoraRank()).put("qk_nope_head_dim", m.qkNopeHeadDim())
                .put("qk_rope_head_dim", m.qkRopeHeadDim()).put("v_head_dim", m.vHeadDim())
                .put("attention_bias", false).put("mlp_bias", false);
        if (c.moe().isEmpty()) {
            o.put("first_k_dense_replace", c.numLayers());
            return;
        }
        MoeConfig moe = c.moe().get();
        MoeRouting r = moe.routing();
        o.put("first_k_dense_replace", moe.sparseLayers().indexOf(true)).put("n_routed_experts", moe.numExperts())
                .put("moe_intermediate_size", moe.expertIntermediateSize())
                .put("n_shared_experts", moe.sharedIntermediateSize() / moe.expertIntermediateSize())
                .put("num_experts_per_tok", r.topK()).put("norm_topk_prob", false)
                .put("routed_scaling_factor", r.routedScalingFactor())
                .put("topk_method", r.numGroups() > 1 ? GROUP_LIMITED : GREEDY).put("n_group", r.numGroups())
                .put("topk_group", r.topkGroups());
    }
}
