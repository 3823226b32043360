package org.mstar.model;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.HashSet;
import java.util.Set;

/**
 * The config.json keys DeepSeek-V2 adds to the Llama ones, with transformers 5's DeepseekV2Config defaults for absent
 * keys. Every key is honoured or refused by name: its attention keys ({@link LatentAttention}), and its mixture-of-
 * experts keys, accepted only while no layer is sparse (layers from {@code first_k_dense_replace} on are; a checkpoint
 * with such layers is refused). Keys that change nothing at inference (initializer_range, the router's training loss)
 * are accepted as they are.
 */
final class DeepseekV2Json {
    private static final int DEFAULT_Q_LORA_RANK = 1536;
    private static final int DEFAULT_KV_LORA_RANK = 512;
    private static final int DEFAULT_ROPE_HEAD_DIM = 64;
    private static final int DEFAULT_NOPE_HEAD_DIM = 128;
    private static final int DEFAULT_V_HEAD_DIM = 128;

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
            throw f.error("layers " + firstSparse + " to " + (layers - 1) + " are mixture-of-experts layers "
                    + "(first_k_dense_replace " + firstSparse + " < num_hidden_layers " + layers + ", n_routed_experts "
                    + f.get("n_routed_experts") + "), which are not supported yet; only checkpoints whose every layer "
                    + "is dense (first_k_dense_replace >= num_hidden_layers) are");
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

    /** The DeepSeek-V2 keys of {@code c}: its latent attention, and every layer dense. */
    static void write(ModelConfig c, ObjectNode o) {
        LatentAttention m = c.latentAttention().orElseThrow();
        if (m.qLoraRank() > 0) {
            o.put("q_lora_rank", m.qLoraRank());
        } else {
            o.putNull("q_lora_rank");
        }
        o.put("kv_lora_rank", m.kvLoraRank()).put("qk_nope_head_dim", m.qkNopeHeadDim())
                .put("qk_rope_head_dim", m.qkRopeHeadDim()).put("v_head_dim", m.vHeadDim())
                .put("first_k_dense_replace", c.numLayers()).put("attention_bias", false).put("mlp_bias", false);
    }
}
