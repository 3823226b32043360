package org.mstar.model;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.OptionalInt;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.IntStream;
import org.mstar.device.Mamba2Shape;

/**
 * The config.json of a model built of Mamba2 mixers: {@code mamba2} (Mamba2ForCausalLM: every layer a norm and a
 * mixer) or {@code bamba} (BambaForCausalLM: the layers of {@code attn_layer_indices} attention as in Llama, the
 * others Mamba2 mixers, each followed by a gated MLP). Every key is read, ignored because it only concerns training
 * or weight initialisation, or refused by name.
 *
 * @param family              which of the two
 * @param mixer               every Mamba2 mixer's geometry
 * @param convBias            whether the mixer's convolution has a bias
 * @param attentionLayers     the attention layers (Bamba), ascending; the other layers are Mamba2 mixers
 * @param attentionHeads      query heads of an attention layer (0 without attention)
 * @param kvHeads             key/value heads of an attention layer
 * @param rotaryDim           channels of a head RoPE rotates (Bamba's partial_rotary_factor of the head)
 * @param ropeTheta           RoPE base
 * @param intermediateSize    the MLP's width (0: no MLP, Mamba2)
 * @param maxPositions        longest sequence (Mamba2 has no bound of its own)
 */
public record HybridConfig(Family family, int hiddenSize, int numLayers, int vocabSize, double normEps,
                           boolean tieWordEmbeddings, OptionalInt bosTokenId, List<Integer> eosTokenIds,
                           Mamba2Shape mixer, boolean convBias, List<Integer> attentionLayers,
                           int attentionHeads, int kvHeads, int rotaryDim, double ropeTheta, int intermediateSize,
                           int maxPositions) {

    /** The architectures, by their config.json names. */
    public enum Family {
        MAMBA2("Mamba2ForCausalLM", "mamba2"),
        BAMBA("BambaForCausalLM", "bamba");

        private final String hfName;
        private final String modelType;

        Family(String hfName, String modelType) {
            this.hfName = hfName;
            this.modelType = modelType;
        }

        public String hfName() {
            return hfName;
        }

        public String modelType() {
            return modelType;
        }
    }

    /** Keys read by both families, or harmless to both (bookkeeping, generation defaults, training-only values). */
    private static final Set<String> COMMON = Set.of("architectures", "model_type", "transformers_version", "dtype",
            "torch_dtype", "hidden_size", "num_hidden_layers", "vocab_size", "tie_word_embeddings", "bos_token_id",
            "eos_token_id", "pad_token_id", "use_cache", "hidden_act", "initializer_range", "time_step_limit",
            "time_step_min", "time_step_max", "time_step_floor");
    private static final Set<String> MAMBA2 = Set.of("num_heads", "head_dim", "n_groups", "state_size", "expand",
            "conv_kernel", "chunk_size", "layer_norm_epsilon", "use_bias", "use_conv_bias", "residual_in_fp32",
            "rms_norm", "rescale_prenorm_residual", "time_step_rank");
    private static final Set<String> BAMBA = Set.of("attn_layer_indices", "num_attention_heads", "num_key_value_heads",
            "intermediate_size", "max_position_embeddings", "rms_norm_eps", "attention_bias", "attention_dropout",
            "mlp_bias", "mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_expand",
            "mamba_d_conv", "mamba_chunk_size", "mamba_conv_bias", "mamba_proj_bias", "partial_rotary_factor",
            "rope_parameters", "rope_theta", "num_logits_to_keep", "z_loss_coefficient");

    public HybridConfig {
        eosTokenIds = List.copyOf(eosTokenIds);
        attentionLayers = List.copyOf(attentionLayers);
    }

    /** Whether {@code layer} is an attention layer (else a Mamba2 mixer). */
    public boolean isAttention(int layer) {
        return attentionLayers.contains(layer);
    }

    /** The Mamba2 layers, ascending. */
    public List<Integer> mambaLayers() {
        return IntStream.range(0, numLayers).filter(l -> !isAttention(l)).boxed().toList();
    }

    /** Channels of an attention head: {@code hiddenSize / attentionHeads}. */
    public int attentionHeadDim() {
        return attentionHeads == 0 ? 0 : hiddenSize / attentionHeads;
    }

    /**
     * Whether {@code folder}'s config.json names a Mamba2 or Bamba architecture (false when it has none or cannot be
     * read: the folder is then left to the other families' loaders, which say what is wrong with it).
     */
    public static boolean isHybrid(Path folder) {
        Path file = folder.resolve("config.json");
        if (!Files.isRegularFile(file)) {
            return false;
        }
        try {
            return isHybrid(HfConfigJson.readFile(file));
        } catch (IOException | ModelFormatException e) {
            return false;
        }
    }

    /** Whether config.json content {@code root} names a Mamba2 or Bamba architecture. */
    public static boolean isHybrid(JsonNode root) {
        JsonNode arch = root.get("architectures");
        return arch != null && arch.isArray() && arch.size() == 1
                && Arrays.stream(Family.values()).anyMatch(f -> f.hfName.equals(arch.get(0).asText()));
    }

    /**
     * Reads config.json content {@code root}, {@code source} naming it in messages.
     *
     * @throws ModelFormatException naming the key that is missing, malformed or not supported
     */
    public static HybridConfig fromJson(JsonNode root, String source) {
        return parse(new ConfigFields(root, source));
    }

    /** @throws ModelFormatException naming the key that is missing, malformed or not supported */
    public static HybridConfig load(Path folder) throws IOException {
        Path file = folder.resolve("config.json");
        return parse(new ConfigFields(HfConfigJson.readFile(file), file.toString()));
    }

    /** The generation defaults: generation_config.json's ids where it has them, else this config's. */
    public GenerationConfig generation(Path folder) throws IOException {
        return GenerationConfig.load(folder, new GenerationConfig(bosTokenId, eosTokenIds));
    }

    static HybridConfig parse(ConfigFields f) {
        Family family = family(f);
        Set<String> known = new TreeSet<>(COMMON);
        known.addAll(family == Family.MAMBA2 ? MAMBA2 : BAMBA);
        f.refuseUnknownKeys(known);
        String act = f.optString("hidden_act", "silu");
        if (!act.equals("silu")) {
            throw f.error("hidden_act '" + act + "' is not supported; only silu");
        }
        int hidden = f.requiredInt("hidden_size");
        int layers = f.requiredInt("num_hidden_layers");
        float[] limit = timeStepLimit(f);
        return family == Family.MAMBA2 ? mamba2(f, hidden, layers, limit) : bamba(f, hidden, layers, limit);
    }

    private static HybridConfig mamba2(ConfigFields f, int hidden, int layers, float[] limit) {
        refuseIf(f, f.optBoolean("use_bias", false), "use_bias=true (a bias on in_proj and out_proj)");
        refuseIf(f, !f.optBoolean("rms_norm", true), "rms_norm=false (a LayerNorm in place of the RMSNorms)");
        refuseIf(f, !f.optBoolean("residual_in_fp32", true),
                "residual_in_fp32=false (the residual stream here is always fp32)");
        Mamba2Shape mixer = shape(f, hidden, f.requiredInt("num_heads"), f.optInt("head_dim", 64),
                f.optInt("n_groups", 8),
                f.optInt("state_size", 128), f.optInt("expand", 2), f.optInt("conv_kernel", 4),
                f.optInt("chunk_size", 256), limit);
        return new HybridConfig(Family.MAMBA2, hidden, layers, f.requiredInt("vocab_size"),
                f.optDouble("layer_norm_epsilon", 1e-5), f.optBoolean("tie_word_embeddings", false),
                f.optTokenId("bos_token_id"), f.tokenIds("eos_token_id"), mixer,
                f.optBoolean("use_conv_bias", true), List.of(), 0, 0, 0, 0, 0, Integer.MAX_VALUE);
    }

    private static HybridConfig bamba(ConfigFields f, int hidden, int layers, float[] limit) {
        refuseIf(f, f.optBoolean("attention_bias", false), "attention_bias=true (a bias on q/k/v/o_proj)");
        refuseIf(f, f.optBoolean("mlp_bias", false), "mlp_bias=true");
        refuseIf(f, f.optBoolean("mamba_proj_bias", false), "mamba_proj_bias=true (a bias on in_proj and out_proj)");
        Mamba2Shape mixer = shape(f, hidden, f.optInt("mamba_n_heads", 128), f.optInt("mamba_d_head", 64),
                f.optInt("mamba_n_groups", 1), f.optInt("mamba_d_state", 256), f.optInt("mamba_expand", 2),
                f.optInt("mamba_d_conv", 4), f.optInt("mamba_chunk_size", 256), limit);
        int heads = f.requiredInt("num_attention_heads");
        int kvHeads = f.optInt("num_key_value_heads", 8); // BambaConfig's default, as for every default here
        if (heads < 1 || hidden % heads != 0 || kvHeads < 1 || heads % kvHeads != 0) {
            throw f.error(heads + " attention heads and " + kvHeads + " key/value heads do not divide hidden_size "
                    + hidden);
        }
        List<Integer> attention = f.tokenIds("attn_layer_indices").stream().sorted().distinct().toList();
        for (int l : attention) {
            if (l < 0 || l >= layers) {
                throw f.error("attn_layer_indices names layer " + l + " of " + layers);
            }
        }
        double theta = f.optDouble("rope_theta", 10_000);
        double partial = f.optDouble("partial_rotary_factor", 0.5);
        ConfigFields rope = f.optObject("rope_parameters");
        if (rope != null) {
            String type = rope.optString("rope_type", "default");
            if (!type.equals("default")) {
                throw rope.error("rope_type '" + type + "' is not supported; only default");
            }
            rope.refuseUnknownKeys(Set.of("rope_type", "rope_theta", "partial_rotary_factor"));
            theta = rope.optDouble("rope_theta", theta);
            partial = rope.optDouble("partial_rotary_factor", partial);
        }
        int headDim = hidden / heads;
        int rotary = (int) (headDim * partial);
        if (rotary < 2 || rotary % 2 != 0 || rotary > headDim) {
            throw f.error("partial_rotary_factor " + partial + " of " + headDim + "-channel heads rotates " + rotary
                    + " channels; RoPE needs an even count from 2 to the head's");
        }
        return new HybridConfig(Family.BAMBA, hidden, layers, f.requiredInt("vocab_size"),
                f.optDouble("rms_norm_eps", 1e-5), f.optBoolean("tie_word_embeddings", false),
                f.optTokenId("bos_token_id"), f.tokenIds("eos_token_id"), mixer,
                f.optBoolean("mamba_conv_bias", true), attention, heads, kvHeads, rotary, theta,
                f.requiredInt("intermediate_size"), f.optInt("max_position_embeddings", 262_144));
    }

    private static Mamba2Shape shape(ConfigFields f, int hidden, int heads, int headDim, int groups, int state,
                                     int expand, int conv, int chunk, float[] limit) {
        if ((long) expand * hidden != (long) heads * headDim) {
            throw f.error("the mixer's width, " + expand + " x " + hidden + " (expand x hidden_size), is not its "
                    + heads + " heads of " + headDim);
        }
        try {
            return new Mamba2Shape(heads, headDim, groups, state, conv, chunk, limit[0], limit[1]);
        } catch (IllegalArgumentException e) {
            throw f.error(e.getMessage());
        }
    }

    /** {@code time_step_limit}: two numbers, the upper one possibly infinite ({@code {"__float__": "Infinity"}}). */
    private static float[] timeStepLimit(ConfigFields f) {
        JsonNode v = f.get("time_step_limit");
        if (v == null) {
            return new float[] {0f, Float.POSITIVE_INFINITY};
        }
        if (!v.isArray() || v.size() != 2) {
            throw f.error("'time_step_limit' must be two numbers, got " + v);
        }
        float[] out = new float[2];
        for (int i = 0; i < 2; i++) {
            JsonNode e = v.get(i);
            if (e.isNumber()) {
                out[i] = e.floatValue();
            } else if (e.isObject() && e.has("__float__")) {
                out[i] = Float.parseFloat(e.get("__float__").asText());
            } else {
                throw f.error("'time_step_limit' must be two numbers, got " + v);
            }
        }
        return out;
    }

    private static Family family(ConfigFields f) {
        JsonNode arch = f.get("architectures");
        String name = arch != null && arch.isArray() && arch.size() == 1 ? arch.get(0).asText() : String.valueOf(arch);
        for (Family family : Family.values()) {
            if (family.hfName.equals(name)) {
                String type = f.optString("model_type", family.modelType);
                if (!type.equals(family.modelType)) {
                    throw f.error("model_type '" + type + "' for " + name + "; expected '" + family.modelType + "'");
                }
                return family;
            }
        }
        throw f.error("architectures " + arch + " is not Mamba2ForCausalLM or BambaForCausalLM");
    }

    private static void refuseIf(ConfigFields f, boolean refused, String what) {
        if (refused) {
            throw f.error(what + " is not supported");
        }
    }
}
