package org.mstar.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Reads and writes config.json's {@code quantization_config} for FP8 weights ({@link Fp8Quantization}). Every key
 * is honoured or refused by name: a scheme this library would load wrongly must not load at all. Keys that only
 * record how the checkpoint was calibrated (observers, compression ratio, status, version) are accepted and read
 * no further, since the stored weights and scales say all the forward needs.
 */
final class QuantizationConfigJson {
    static final String KEY = "quantization_config";
    /** What older compressed-tensors checkpoints call it. */
    static final String OLD_KEY = "compression_config";

    private static final String FP8 = "fp8";
    private static final String COMPRESSED_TENSORS = "compressed-tensors";
    private static final String FLOAT_QUANTIZED = "float-quantized";

    private static final Set<String> FP8_KEYS = Set.of("quant_method", "fmt", "activation_scheme", "weight_block_size",
            "modules_to_not_convert", "ignored_layers", "scale_fmt");
    private static final Set<String> COMPRESSED_KEYS = Set.of("quant_method", "format", "config_groups", "ignore",
            "kv_cache_scheme", "sparsity_config", "transform_config", "quantization_status", "global_compression_ratio",
            "version");
    private static final Set<String> GROUP_KEYS = Set.of("targets", "weights", "input_activations",
            "output_activations", "format");
    private static final Set<String> ARGS_KEYS = Set.of("num_bits", "type", "symmetric", "strategy", "dynamic",
            "group_size", "block_structure", "actorder", "observer", "observer_kwargs");

    private QuantizationConfigJson() {}

    /** The FP8 quantisation config.json declares, or null when it declares none. */
    static Fp8Quantization parse(ConfigFields config) {
        if (config.has(KEY) && config.has(OLD_KEY)) {
            throw config.error("both '" + KEY + "' and '" + OLD_KEY + "' are given; keep one");
        }
        ConfigFields q = config.optObject(config.has(KEY) ? KEY : OLD_KEY);
        if (q == null) {
            return null;
        }
        String method = q.optString("quant_method", null);
        if (FP8.equals(method)) {
            return fineGrainedFp8(q);
        }
        if (COMPRESSED_TENSORS.equals(method)) {
            return compressedTensors(q);
        }
        throw q.error("quant_method '" + method + "' is not supported; supported: " + FP8 + ", " + COMPRESSED_TENSORS
                + " (FP8 weights)");
    }

    /** transformers' FineGrainedFP8Config, as DeepSeek-V3 and Qwen3-FP8 publish it. */
    private static Fp8Quantization fineGrainedFp8(ConfigFields q) {
        q.refuseUnknownKeys(FP8_KEYS);
        require(q, "fmt", "e4m3", "e4m3");
        // DeepSeek-V3.1 and later: the dynamic activation scales are rounded to powers of two. Activations are not
        // quantised here and the weight scales are read as stored, so it changes nothing; other formats are unknown.
        require(q, "scale_fmt", "ue8m0", "ue8m0");
        String activations = q.optString("activation_scheme", "dynamic");
        if (!activations.equals("dynamic")) {
            throw q.error("activation_scheme '" + activations + "' (activation scales stored in the checkpoint) is not "
                    + "supported; supported: dynamic");
        }
        JsonNode block = q.get("weight_block_size");
        if (block == null) {
            throw q.error("'weight_block_size' is missing: fp8 with one scale a tensor is not supported; supported: "
                    + "[rows, cols] blocks");
        }
        if (!block.isArray() || block.size() != 2 || !positiveInt(block.get(0)) || !positiveInt(block.get(1))) {
            throw q.error("'weight_block_size' must be two positive sizes [rows, cols], got " + block);
        }
        List<String> skipped = names(q, "modules_to_not_convert");
        skipped.addAll(names(q, "ignored_layers"));
        return Fp8Quantization.blocks(block.get(0).intValue(), block.get(1).intValue(), skipped);
    }

    /** compressed-tensors' float-quantized format with one scheme for every Linear layer, as llm-compressor saves it. */
    private static Fp8Quantization compressedTensors(ConfigFields q) {
        q.refuseUnknownKeys(COMPRESSED_KEYS);
        require(q, "format", FLOAT_QUANTIZED, null);
        requireAbsent(q, "kv_cache_scheme", "an FP8 KV cache");
        requireAbsent(q, "transform_config", "transformed (rotated) weights");
        if (q.has("sparsity_config") && !q.get("sparsity_config").isEmpty()) {
            throw q.error("'sparsity_config' " + q.get("sparsity_config") + " (sparse weights) is not supported");
        }
        JsonNode groups = q.get("config_groups");
        if (groups == null || !groups.isObject() || groups.size() != 1) {
            throw q.error("'config_groups' must hold exactly one scheme, got " + groups);
        }
        ConfigFields group = q.optObject("config_groups").optObject(groups.fieldNames().next());
        group.refuseUnknownKeys(GROUP_KEYS);
        require(group, "format", FLOAT_QUANTIZED, FLOAT_QUANTIZED);
        JsonNode targets = group.get("targets");
        if (targets == null || !targets.isArray() || targets.size() != 1 || !"Linear".equals(targets.get(0).textValue())) {
            throw group.error("'targets' must be [\"Linear\"], got " + targets);
        }
        requireAbsent(group, "output_activations", "quantised layer outputs");
        ConfigFields inputs = group.optObject("input_activations");
        if (inputs != null) {
            floatEightBits(inputs);
            if (!inputs.optBoolean("dynamic", false)) {
                throw inputs.error("'dynamic' false (static activation scales, input_scale tensors) is not supported; "
                        + "supported: true");
            }
            String strategy = inputs.optString("strategy", null);
            if (!"token".equals(strategy) && !"tensor".equals(strategy)) {
                throw inputs.error("'strategy' '" + strategy + "' is not supported; supported: token, tensor");
            }
        }
        ConfigFields weights = group.optObject("weights");
        if (weights == null) {
            throw group.error("missing 'weights'");
        }
        floatEightBits(weights);
        if (weights.optBoolean("dynamic", false)) {
            throw weights.error("'dynamic' true (weights quantised at run time) is not supported; supported: false");
        }
        List<String> ignored = names(q, "ignore");
        String strategy = weights.optString("strategy", null);
        if ("channel".equals(strategy)) {
            return Fp8Quantization.channels(ignored);
        }
        if ("tensor".equals(strategy)) {
            return Fp8Quantization.perTensor(ignored);
        }
        throw weights.error("'strategy' '" + strategy + "' is not supported; supported: channel, tensor");
    }

    /** Quantisation arguments of 8-bit symmetric floats, without groups, blocks or activation ordering. */
    private static void floatEightBits(ConfigFields args) {
        args.refuseUnknownKeys(ARGS_KEYS);
        if (args.optInt("num_bits", 0) != 8) {
            throw args.error("'num_bits' " + args.get("num_bits") + " is not supported; supported: 8");
        }
        require(args, "type", "float", null);
        if (!args.optBoolean("symmetric", true)) {
            throw args.error("'symmetric' false (a zero point) is not supported; supported: true");
        }
        requireAbsent(args, "group_size", "group scales");
        requireAbsent(args, "block_structure", "block scales in compressed-tensors");
        if (args.has("actorder") && !args.get("actorder").asText().equals("false")) {
            throw args.error("'actorder' " + args.get("actorder") + " is not supported; supported: null");
        }
    }

    /** {@code key} must be {@code expected}; absent reads as {@code absent} (null = required). */
    private static void require(ConfigFields f, String key, String expected, String absent) {
        String value = f.optString(key, absent);
        if (!expected.equals(value)) {
            throw f.error("'" + key + "' " + (value == null ? "is missing" : "'" + value + "' is not supported")
                    + "; supported: " + expected);
        }
    }

    private static void requireAbsent(ConfigFields f, String key, String what) {
        if (f.has(key)) {
            throw f.error("'" + key + "' " + f.get(key) + " (" + what + ") is not supported; supported: null");
        }
    }

    private static boolean positiveInt(JsonNode n) {
        return n != null && n.canConvertToInt() && n.isIntegralNumber() && n.intValue() > 0;
    }

    private static List<String> names(ConfigFields f, String key) {
        List<String> out = new ArrayList<>();
        JsonNode list = f.get(key);
        if (list == null) {
            return out;
        }
        if (!list.isArray()) {
            throw f.error("'" + key + "' must be a list of module names, got " + list);
        }
        for (JsonNode n : list) {
            if (!n.isTextual()) {
                throw f.error("'" + key + "' must be a list of module names, got " + list);
            }
            out.add(n.textValue());
        }
        return out;
    }

    /** {@code q} as the published checkpoints of its layout write it. */
    static ObjectNode write(Fp8Quantization q) {
        ObjectNode o = HfConfigJson.JSON.createObjectNode();
        if (q.layout() == Fp8Quantization.Layout.BLOCK) {
            o.put("quant_method", FP8).put("fmt", "e4m3").put("activation_scheme", "dynamic");
            o.putArray("weight_block_size").add(q.blockRows()).add(q.blockCols());
            strings(o.putArray("modules_to_not_convert"), q.unquantisedModules());
            return o;
        }
        o.put("quant_method", COMPRESSED_TENSORS).put("format", FLOAT_QUANTIZED);
        ObjectNode group = o.putObject("config_groups").putObject("group_0");
        group.putArray("targets").add("Linear");
        group.putObject("weights").put("num_bits", 8).put("type", "float").put("symmetric", true).put("dynamic", false)
                .put("strategy", q.layout() == Fp8Quantization.Layout.CHANNEL ? "channel" : "tensor");
        group.putObject("input_activations").put("num_bits", 8).put("type", "float").put("symmetric", true)
                .put("dynamic", true).put("strategy", "token");
        strings(o.putArray("ignore"), q.unquantisedModules());
        o.putNull("kv_cache_scheme");
        o.put("quantization_status", "compressed");
        return o;
    }

    private static void strings(ArrayNode a, List<String> values) {
        values.forEach(a::add);
    }
}
