package org.mstar.model;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.OptionalInt;
import org.mstar.device.DType;

/**
 * Reads and writes the Hugging Face config.json and generation_config.json keys, with transformers' defaults
 * for absent keys. Only what changes the forward is read; keys such as initializer_range are ignored.
 */
final class HfConfigJson {
    /** Text after the JSON object is an error, not ignored as Jackson would by default. */
    static final ObjectMapper JSON = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    /** transformers' MistralConfig default when config.json has no sliding_window key at all. */
    private static final int MISTRAL_DEFAULT_WINDOW = 4096;
    /** transformers' Qwen2Config defaults. */
    private static final int QWEN2_DEFAULT_WINDOW = 4096;
    private static final int QWEN2_DEFAULT_MAX_WINDOW_LAYERS = 28;
    /** transformers' Gemma3TextConfig defaults. */
    private static final int GEMMA3_DEFAULT_WINDOW = 4096;
    private static final int GEMMA3_DEFAULT_PATTERN = 6;
    private static final double GEMMA3_DEFAULT_LOCAL_THETA = 10_000;
    private static final double GEMMA3_DEFAULT_QUERY_PRE_ATTN_SCALAR = 256;

    private HfConfigJson() {}

    /** @throws ModelFormatException naming {@code file} when it is not one JSON object */
    static JsonNode readFile(Path file) throws IOException {
        try {
            JsonNode root = JSON.readTree(file.toFile());
            if (root == null || !root.isObject()) {
                throw new ModelFormatException(file + ": not a JSON object");
            }
            return root;
        } catch (JsonProcessingException e) {
            throw new ModelFormatException(file + ": not valid JSON: " + e.getOriginalMessage()
                    + (e.getLocation() == null ? "" : " (line " + e.getLocation().getLineNr() + ", column "
                    + e.getLocation().getColumnNr() + ")"));
        }
    }

    static ModelConfig parseModelConfig(ConfigFields f) {
        Architecture arch = architecture(f);
        requireActivation(f, arch);
        if (f.optBoolean("mlp_bias", false)) {
            throw f.error("mlp_bias=true is not supported");
        }
        if (arch != Architecture.QWEN2 && f.optBoolean("attention_bias", false)) {
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
                .maxPositionEmbeddings(f.requiredInt("max_position_embeddings"))
                .vocabSize(f.requiredInt("vocab_size"))
                .tieWordEmbeddings(f.optBoolean("tie_word_embeddings", arch == Architecture.GEMMA3))
                .bosTokenId(f.optTokenId("bos_token_id"))
                .eosTokenIds(f.tokenIds("eos_token_id"))
                .dtype(dtype(f))
                .quantization(QuantizationConfigJson.parse(f))
                .moe(MoeConfigJson.parse(f, arch));
        rope(f, arch, b);
        switch (arch) {
            case MISTRAL -> b.slidingWindow(window(f, MISTRAL_DEFAULT_WINDOW), 0);
            case QWEN2, QWEN3 -> b.slidingWindow(f.optBoolean("use_sliding_window", false) ? window(f, QWEN2_DEFAULT_WINDOW) : 0,
                    f.optInt("max_window_layers", QWEN2_DEFAULT_MAX_WINDOW_LAYERS));
            case PHI3 -> b.slidingWindow(f.optInt("sliding_window", 0), 0);
            case GEMMA3 -> gemma3(f, b);
            case DEEPSEEK_V2 -> DeepseekV2Json.read(f, b);
            case LLAMA, OLMOE, QWEN3_MOE -> { }
        }
        if (f.has("layer_types")) {
            b.windowedLayers(layerTypes(f));
        }
        try {
            return b.build();
        } catch (ModelFormatException e) {
            throw f.error(e.getMessage());
        }
    }

    private static void requireActivation(ConfigFields f, Architecture arch) {
        String expected = arch == Architecture.GEMMA3 ? "gelu_pytorch_tanh" : "silu";
        // Gemma 3 names it hidden_activation; a hidden_act beside it must agree
        for (String key : arch == Architecture.GEMMA3 ? List.of("hidden_activation", "hidden_act") : List.of("hidden_act")) {
            String act = f.optString(key, expected);
            if (!act.equals(expected)) {
                throw f.error(key + " '" + act + "' is not supported; " + arch.hfName() + " runs with '" + expected + "'");
            }
        }
    }

    /**
     * RoPE base, scaling and partial rotary factor: transformers 5's rope_parameters (one entry, or for Gemma 3 one per
     * layer type) or the older rope_theta / rope_scaling / rope_local_base_freq keys.
     */
    private static void rope(ConfigFields f, Architecture arch, ModelConfig.Builder b) {
        double partial = f.optDouble("partial_rotary_factor", 1);
        ConfigFields global;
        if (f.has("rope_parameters")) {
            ConfigFields rope = new ConfigFields(f.get("rope_parameters"), f.source() + " rope_parameters");
            refuseDisagreeingRopeScaling(f, rope);
            if (rope.has("full_attention") || rope.has("sliding_attention")) {
                if (arch != Architecture.GEMMA3) {
                    throw f.error("rope_parameters per layer type is not supported for " + arch.hfName());
                }
                global = sub(rope, "full_attention");
                ConfigFields local = sub(rope, "sliding_attention");
                if (ropeScaling(local).kind() != RopeScaling.Kind.NONE) {
                    throw local.error("scaled RoPE on sliding_attention layers is not supported");
                }
                b.localRopeTheta(local.optDouble("rope_theta", GEMMA3_DEFAULT_LOCAL_THETA));
            } else {
                global = rope;
                if (arch == Architecture.GEMMA3) {
                    b.localRopeTheta(f.optDouble("rope_local_base_freq", GEMMA3_DEFAULT_LOCAL_THETA));
                }
            }
            b.ropeTheta(global.optDouble("rope_theta", 10_000)).ropeScaling(ropeScaling(global));
            partial = global.optDouble("partial_rotary_factor", partial);
        } else {
            b.ropeTheta(f.optDouble("rope_theta", arch == Architecture.GEMMA3 ? 1_000_000 : 10_000));
            if (f.has("rope_scaling")) {
                b.ropeScaling(ropeScaling(new ConfigFields(f.get("rope_scaling"), f.source() + " rope_scaling")));
            }
            if (arch == Architecture.GEMMA3) {
                b.localRopeTheta(f.optDouble("rope_local_base_freq", GEMMA3_DEFAULT_LOCAL_THETA));
            }
        }
        b.partialRotaryFactor(partial);
    }

    private static ConfigFields sub(ConfigFields parent, String key) {
        if (!parent.has(key)) {
            throw parent.error("missing '" + key + "'");
        }
        return new ConfigFields(parent.get(key), parent.source() + "." + key);
    }

    /** Gemma 3: scores scaled by query_pre_attn_scalar, windowed layers by layer_types or the older pattern. */
    private static void gemma3(ConfigFields f, ModelConfig.Builder b) {
        for (String key : List.of("final_logit_softcapping", "attn_logit_softcapping")) {
            if (f.has(key)) {
                throw f.error(key + " " + f.get(key) + " is not supported (Gemma 3 checkpoints set it to null)");
            }
        }
        if (f.optBoolean("use_bidirectional_attention", false)) {
            throw f.error("use_bidirectional_attention=true (an encoder) is not supported");
        }
        int layers = f.requiredInt("num_hidden_layers");
        b.queryPreAttnScalar(f.optDouble("query_pre_attn_scalar", GEMMA3_DEFAULT_QUERY_PRE_ATTN_SCALAR))
                .slidingWindow(window(f, GEMMA3_DEFAULT_WINDOW), 0);
        // before layer_types existed, every pattern-th layer was global; transformers 5 saves the pattern as _sliding_window_pattern
        int pattern = f.optInt("sliding_window_pattern", f.optInt("_sliding_window_pattern", GEMMA3_DEFAULT_PATTERN));
        if (pattern < 1) {
            throw f.error("sliding_window_pattern must be >= 1, got " + pattern);
        }
        List<Boolean> windowed = new ArrayList<>();
        for (int i = 0; i < layers; i++) {
            windowed.add((i + 1) % pattern != 0);
        }
        b.windowedLayers(windowed);
    }

    private static List<Boolean> layerTypes(ConfigFields f) {
        JsonNode types = f.get("layer_types");
        if (!types.isArray()) {
            throw f.error("'layer_types' must be a list, got " + types);
        }
        List<Boolean> windowed = new ArrayList<>();
        for (JsonNode t : types) {
            String type = t.asText();
            switch (type) {
                case "full_attention" -> windowed.add(false);
                case "sliding_attention" -> windowed.add(true);
                default -> throw f.error("layer type '" + t + "' is not supported; supported: full_attention, sliding_attention");
            }
        }
        return windowed;
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
        Architecture arch;
        try {
            arch = Architecture.fromHfName(archs.get(0).textValue());
        } catch (ModelFormatException e) {
            throw f.error(e.getMessage());
        }
        String modelType = f.optString("model_type", arch.modelType());
        if (!modelType.equals(arch.modelType())) {
            throw f.error("model_type '" + modelType + "' contradicts architectures " + archs + " (whose model_type is '"
                    + arch.modelType() + "')");
        }
        return arch;
    }

    /**
     * transformers 5 reads rope_parameters and ignores a legacy rope_scaling beside it; one that asks for other
     * scaling (another type, or another value of a key both have) would be dropped without a word, so it is refused.
     */
    private static void refuseDisagreeingRopeScaling(ConfigFields f, ConfigFields ropeParameters) {
        if (!f.has("rope_scaling") || f.get("rope_scaling").isNull()) {
            return;
        }
        ConfigFields global = ropeParameters.has("full_attention") ? sub(ropeParameters, "full_attention")
                : ropeParameters;
        ConfigFields legacy = new ConfigFields(f.get("rope_scaling"), f.source() + " rope_scaling");
        String legacyType = ropeType(legacy);
        boolean agree = legacyType.equals(ropeType(global));
        for (var it = f.get("rope_scaling").fields(); agree && it.hasNext(); ) {
            var e = it.next();
            agree = e.getKey().equals("type") || e.getKey().equals("rope_type") || !global.has(e.getKey())
                    || global.get(e.getKey()).equals(e.getValue());
        }
        if (!agree) {
            throw f.error("rope_scaling (rope_type '" + legacyType + "') disagrees with rope_parameters (rope_type '"
                    + ropeType(global) + "'), which transformers reads instead; remove rope_scaling or make them agree");
        }
    }

    private static String ropeType(ConfigFields s) {
        return s.optString("rope_type", s.optString("type", "default"));
    }

    private static RopeScaling ropeScaling(ConfigFields s) {
        String type = ropeType(s);
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
        o.put(c.geluTanhMlp() ? "hidden_activation" : "hidden_act", c.geluTanhMlp() ? "gelu_pytorch_tanh" : "silu");
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
            case LLAMA, OLMOE, QWEN3_MOE -> o.put("attention_bias", false).put("mlp_bias", false);
            case MISTRAL, PHI3 -> putWindow(o, c.slidingWindow());
            case QWEN2, QWEN3 -> {
                o.put("use_sliding_window", c.slidingWindow() > 0);
                putWindow(o, c.slidingWindow());
                o.put("max_window_layers", c.firstSlidingWindowLayer());
            }
            case GEMMA3 -> {
                putWindow(o, c.slidingWindow());
                o.put("rope_local_base_freq", c.localRopeTheta());
                o.put("query_pre_attn_scalar", c.queryPreAttnScalar());
                o.putNull("final_logit_softcapping");
                o.putNull("attn_logit_softcapping");
            }
            case DEEPSEEK_V2 -> DeepseekV2Json.write(c, o);
        }
        if (!c.windowedLayers().isEmpty()) {
            var types = o.putArray("layer_types");
            c.windowedLayers().forEach(w -> types.add(w ? "sliding_attention" : "full_attention"));
        }
        c.quantization().ifPresent(q -> o.set(QuantizationConfigJson.KEY, QuantizationConfigJson.write(q)));
        if (c.architecture() != Architecture.DEEPSEEK_V2) {
            c.moe().ifPresent(m -> MoeConfigJson.write(o, c.architecture(), m));
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

    static GenerationConfig parseGenerationConfig(ConfigFields f, GenerationConfig fallback) {
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
