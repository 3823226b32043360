package org.mstar.model;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import java.util.Locale;
import java.util.OptionalInt;
import org.mstar.device.DType;

/**
 * Reads and writes the Hugging Face config.json and generation_config.json keys, with transformers' defaults
 * for absent keys. Only what changes the forward is read; keys such as initializer_range are ignored.
 */
final class HfConfigJson {
    static final ObjectMapper JSON = new ObjectMapper();

    /** transformers' MistralConfig default when config.json has no sliding_window key at all. */
    private static final int MISTRAL_DEFAULT_WINDOW = 4096;
    /** transformers' Qwen2Config defaults. */
    private static final int QWEN2_DEFAULT_WINDOW = 4096;
    private static final int QWEN2_DEFAULT_MAX_WINDOW_LAYERS = 28;

    private HfConfigJson() {}

    static ModelConfig parseModelConfig(ConfigFields f) {
        Architecture arch = architecture(f);
        String act = f.optString("hidden_act", "silu");
        if (!act.equals("silu")) {
            throw f.error("hidden_act '" + act + "' is not supported; the Llama family uses 'silu'");
        }
        if (f.optBoolean("mlp_bias", false)) {
            throw f.error("mlp_bias=true is not supported");
        }
        if (arch == Architecture.LLAMA && f.optBoolean("attention_bias", false)) {
            throw f.error("attention_bias=true (a bias on q/k/v/o_proj) is not supported");
        }
        ModelConfig.Builder b = ModelConfig.builder(arch)
                .hiddenSize(f.requiredInt("hidden_size"))
                .intermediateSize(f.requiredInt("intermediate_size"))
                .numLayers(f.requiredInt("num_hidden_layers"))
                .numHeads(f.requiredInt("num_attention_heads"))
                .numKvHeads(f.optInt("num_key_value_heads", 0))
                .headDim(f.optInt("head_dim", 0))
                .rmsNormEps(f.optDouble("rms_norm_eps", 1e-6))
                .partialRotaryFactor(f.optDouble("partial_rotary_factor", 1))
                .maxPositionEmbeddings(f.requiredInt("max_position_embeddings"))
                .vocabSize(f.requiredInt("vocab_size"))
                .tieWordEmbeddings(f.optBoolean("tie_word_embeddings", false))
                .bosTokenId(f.optTokenId("bos_token_id"))
                .eosTokenIds(f.tokenIds("eos_token_id"))
                .dtype(dtype(f));
        // transformers 5 moved rope_theta and the scaling entry into one rope_parameters object
        if (f.has("rope_parameters")) {
            ConfigFields rope = new ConfigFields(f.get("rope_parameters"), f.source() + " rope_parameters");
            b.ropeTheta(rope.optDouble("rope_theta", 10_000)).ropeScaling(ropeScaling(rope));
        } else {
            b.ropeTheta(f.optDouble("rope_theta", 10_000));
            if (f.has("rope_scaling")) {
                b.ropeScaling(ropeScaling(new ConfigFields(f.get("rope_scaling"), f.source() + " rope_scaling")));
            }
        }
        switch (arch) {
            case MISTRAL -> b.slidingWindow(window(f, MISTRAL_DEFAULT_WINDOW), 0);
            case QWEN2 -> b.slidingWindow(f.optBoolean("use_sliding_window", false) ? window(f, QWEN2_DEFAULT_WINDOW) : 0,
                    f.optInt("max_window_layers", QWEN2_DEFAULT_MAX_WINDOW_LAYERS));
            case LLAMA -> { }
        }
        try {
            return b.build();
        } catch (ModelFormatException e) {
            throw f.error(e.getMessage());
        }
    }

    /** sliding_window: the class default when the key is absent, none when it is null. */
    private static int window(ConfigFields f, int absent) {
        return f.hasKey("sliding_window") ? f.optInt("sliding_window", 0) : absent;
    }

    private static Architecture architecture(ConfigFields f) {
        var archs = f.get("architectures");
        if (archs == null || !archs.isArray() || archs.isEmpty() || !archs.get(0).isTextual()) {
            throw f.error("missing 'architectures' (a list naming the model class, e.g. [\"LlamaForCausalLM\"])");
        }
        try {
            return Architecture.fromHfName(archs.get(0).textValue());
        } catch (ModelFormatException e) {
            throw f.error(e.getMessage());
        }
    }

    private static RopeScaling ropeScaling(ConfigFields s) {
        String type = s.optString("rope_type", s.optString("type", "default"));
        return switch (type) {
            case "default" -> RopeScaling.none();
            case "linear" -> RopeScaling.linear(s.requiredDouble("factor"));
            case "llama3" -> RopeScaling.llama3(s.requiredDouble("factor"), s.requiredDouble("low_freq_factor"),
                    s.requiredDouble("high_freq_factor"), s.requiredInt("original_max_position_embeddings"));
            default -> throw s.error("rope scaling type '" + type + "' is not supported; supported: default, linear, llama3");
        };
    }

    private static DType dtype(ConfigFields f) {
        // transformers 4.56+ writes "dtype"; older versions "torch_dtype"
        String name = f.optString("torch_dtype", f.optString("dtype", "float32"));
        return switch (name.toLowerCase(Locale.ROOT)) {
            case "bfloat16" -> DType.BF16;
            case "float16", "half" -> DType.F16;
            case "float32", "float" -> DType.F32;
            default -> throw f.error("torch_dtype '" + name + "' is not supported; supported: bfloat16, float16, float32");
        };
    }

    private static String torchDtype(DType dtype) {
        return switch (dtype) {
            case BF16 -> "bfloat16";
            case F16 -> "float16";
            case F32 -> "float32";
            default -> throw new IllegalArgumentException("not a float dtype: " + dtype);
        };
    }

    static ObjectNode writeModelConfig(ModelConfig c) {
        ObjectNode o = JSON.createObjectNode();
        o.putArray("architectures").add(c.architecture().hfName());
        o.put("model_type", c.architecture().modelType());
        o.put("hidden_size", c.hiddenSize());
        o.put("intermediate_size", c.intermediateSize());
        o.put("num_hidden_layers", c.numLayers());
        o.put("num_attention_heads", c.numHeads());
        o.put("num_key_value_heads", c.numKvHeads());
        o.put("head_dim", c.headDim());
        o.put("hidden_act", "silu");
        o.put("rms_norm_eps", c.rmsNormEps());
        o.put("rope_theta", c.ropeTheta());
        RopeScaling rs = c.ropeScaling();
        switch (rs.kind()) {
            case NONE -> o.putNull("rope_scaling");
            case LINEAR -> o.putObject("rope_scaling").put("rope_type", "linear").put("factor", rs.factor());
            case LLAMA3 -> o.putObject("rope_scaling").put("rope_type", "llama3").put("factor", rs.factor())
                    .put("low_freq_factor", rs.lowFreqFactor()).put("high_freq_factor", rs.highFreqFactor())
                    .put("original_max_position_embeddings", rs.originalMaxPositions());
        }
        if (c.partialRotaryFactor() != 1) {
            o.put("partial_rotary_factor", c.partialRotaryFactor());
        }
        o.put("max_position_embeddings", c.maxPositionEmbeddings());
        o.put("vocab_size", c.vocabSize());
        o.put("tie_word_embeddings", c.tieWordEmbeddings());
        putTokenIds(o, c.bosTokenId(), c.eosTokenIds());
        o.put("torch_dtype", torchDtype(c.dtype()));
        switch (c.architecture()) {
            case LLAMA -> o.put("attention_bias", false).put("mlp_bias", false);
            case MISTRAL -> putWindow(o, c.slidingWindow());
            case QWEN2 -> {
                o.put("use_sliding_window", c.slidingWindow() > 0);
                putWindow(o, c.slidingWindow());
                o.put("max_window_layers", c.firstSlidingWindowLayer());
            }
        }
        return o;
    }

    private static void putWindow(ObjectNode o, int window) {
        if (window > 0) {
            o.put("sliding_window", window);
        } else {
            o.putNull("sliding_window");
        }
    }

    static GenerationConfig parseGenerationConfig(ConfigFields f, ModelConfig fallback) {
        OptionalInt bos = f.optTokenId("bos_token_id");
        List<Integer> eos = f.tokenIds("eos_token_id");
        return new GenerationConfig(bos.isPresent() ? bos : fallback.bosTokenId(),
                eos.isEmpty() ? fallback.eosTokenIds() : eos);
    }

    static ObjectNode writeGenerationConfig(GenerationConfig g) {
        ObjectNode o = JSON.createObjectNode();
        putTokenIds(o, g.bosTokenId(), g.eosTokenIds());
        return o;
    }

    private static void putTokenIds(ObjectNode o, OptionalInt bos, List<Integer> eos) {
        if (bos.isPresent()) {
            o.put("bos_token_id", bos.getAsInt());
        } else {
            o.putNull("bos_token_id");
        }
        if (eos.isEmpty()) {
            o.putNull("eos_token_id");
        } else if (eos.size() == 1) {
            o.put("eos_token_id", eos.get(0));
        } else {
            eos.forEach(o.putArray("eos_token_id")::add);
        }
    }
}
