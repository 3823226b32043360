package org.mstar.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class Fp8QuantizationConfigTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** Qwen3-FP8's and DeepSeek-V3's quantization_config. */
    private static final String BLOCK = """
            {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}""";

    /** Llama-3.1-8B-Instruct-FP8's, as llm-compressor saves it. */
    private static final String CHANNEL = """
            {"quant_method": "compressed-tensors", "format": "float-quantized", "global_compression_ratio": 1.24,
             "quantization_status": "compressed", "kv_cache_scheme": null, "ignore": ["lm_head"], "version": "0.7.1",
             "sparsity_config": {},
             "config_groups": {"group_0": {"targets": ["Linear"], "output_activations": null, "format": "float-quantized",
               "weights": {"num_bits": 8, "type": "float", "symmetric": true, "dynamic": false, "strategy": "channel",
                           "group_size": null, "block_structure": null, "actorder": null, "observer": "minmax",
                           "observer_kwargs": {}},
               "input_activations": {"num_bits": 8, "type": "float", "symmetric": true, "dynamic": true,
                                     "strategy": "token", "group_size": null, "block_structure": null,
                                     "observer": null, "observer_kwargs": {}}}}}""";

    private static ObjectNode config(String quantization) throws IOException {
        ObjectNode root = (ObjectNode) JSON.readTree(
                ModelConfigTest.sample("llama-3.1-8b-instruct").resolve("config.json").toFile());
        root.set("quantization_config", JSON.readTree(quantization));
        return root;
    }

    private static ModelConfig parse(ObjectNode json) {
        return ModelConfig.fromJson(json, "test config.json");
    }

    private static ObjectNode quantization(ObjectNode config) {
        return (ObjectNode) config.get("quantization_config");
    }

    private static ObjectNode weights(ObjectNode config) {
        return (ObjectNode) quantization(config).get("config_groups").get("group_0").get("weights");
    }

    @Test
    void blockScaledFp8IsReadWithTheOutputEmbeddingKept() throws IOException {
        Fp8Quantization q = parse(config(BLOCK)).quantization().orElseThrow();

        assertThat(q).isEqualTo(Fp8Quantization.blocks(128, 128, List.of("lm_head")));
        assertThat(q.quantises("model.layers.3.self_attn.q_proj.weight")).isTrue();
        assertThat(q.quantises("model.layers.3.mlp.gate_up_proj.weight")).isTrue();
        assertThat(q.quantises("lm_head.weight")).isFalse();
        assertThat(q.quantises("model.embed_tokens.weight")).isFalse();
        assertThat(q.quantises("model.layers.3.input_layernorm.weight")).isFalse();
        assertThat(q.quantises("model.layers.3.self_attn.q_proj.bias")).isFalse();
        assertThat(q.scaleName("model.layers.3.mlp.down_proj.weight"))
                .isEqualTo("model.layers.3.mlp.down_proj.weight_scale_inv");
        assertThat(q.scaleShape(300, 129)).containsExactly(3, 2);
        assertThat(q.scaleIndex(257, 128, 129)).isEqualTo(5);
    }

    /** DeepSeek-V3.1's block layout adds the power-of-two activation scale format, which changes nothing here. */
    @Test
    void powerOfTwoActivationScalesReadAsTheSameBlocks() throws IOException {
        ObjectNode json = config(BLOCK);
        quantization(json).put("scale_fmt", "ue8m0");
        assertThat(parse(json).quantization()).isEqualTo(parse(config(BLOCK)).quantization());
    }

    @Test
    void compressedTensorsChannelFp8IsReadWithItsIgnoreList() throws IOException {
        Fp8Quantization q = parse(config(CHANNEL)).quantization().orElseThrow();

        assertThat(q).isEqualTo(Fp8Quantization.channels(List.of("lm_head")));
        assertThat(q.quantises("lm_head.weight")).isFalse();
        assertThat(q.quantises("model.layers.0.mlp.down_proj.weight")).isTrue();
        assertThat(q.scaleName("model.layers.0.mlp.down_proj.weight")).isEqualTo("model.layers.0.mlp.down_proj.weight_scale");
        assertThat(q.scaleShape(300, 129)).containsExactly(300, 1);
        assertThat(q.scaleIndex(257, 128, 129)).isEqualTo(257);
    }

    @Test
    void modulesAreSkippedByNameSuffixOrRegex() throws IOException {
        ObjectNode json = config(BLOCK);
        quantization(json).putArray("modules_to_not_convert").add("model.layers.0.mlp.down_proj").add("o_proj");
        quantization(json).putArray("ignored_layers").add("re:.*layers\\.1\\..*");
        Fp8Quantization q = parse(json).quantization().orElseThrow();

        assertThat(q.quantises("model.layers.0.mlp.down_proj.weight")).isFalse();
        assertThat(q.quantises("model.layers.2.mlp.down_proj.weight")).isTrue();
        assertThat(q.quantises("model.layers.2.self_attn.o_proj.weight")).isFalse();
        assertThat(q.quantises("model.layers.1.mlp.up_proj.weight")).isFalse();
        assertThat(q.quantises("model.layers.11.mlp.up_proj.weight")).isTrue();
    }

    @Test
    void theOlderCompressionConfigKeyReadsTheSame() throws IOException {
        ObjectNode json = config(CHANNEL);
        json.set("compression_config", json.remove("quantization_config"));
        assertThat(parse(json).quantization()).contains(Fp8Quantization.channels(List.of("lm_head")));

        json.set("quantization_config", json.get("compression_config"));
        assertThatThrownBy(() -> parse(json)).hasMessageContaining("both 'quantization_config' and 'compression_config'");
    }

    @Test
    void noQuantizationConfigMeansNoFp8() throws IOException {
        ObjectNode json = config(BLOCK);
        json.remove("quantization_config");
        assertThat(parse(json).quantization()).isEmpty();
    }

    static Stream<Fp8Quantization> layouts() {
        return Stream.of(Fp8Quantization.blocks(128, 128, List.of()), Fp8Quantization.blocks(16, 32, List.of("o_proj")),
                Fp8Quantization.channels(List.of("lm_head")), Fp8Quantization.perTensor(List.of()));
    }

    @ParameterizedTest
    @MethodSource("layouts")
    void writtenJsonReadsBackEqual(Fp8Quantization q) throws IOException {
        ModelConfig c = parse(config(BLOCK)).toBuilder().quantization(q).build();
        assertThat(parse(c.toJson())).isEqualTo(c);
    }

    static Stream<Arguments> refusals() {
        return Stream.of(
                refusal("unknown quant_method", BLOCK, j -> quantization(j).put("quant_method", "gptq"),
                        "quant_method 'gptq' is not supported; supported: fp8, compressed-tensors"),
                refusal("unknown key", BLOCK, j -> quantization(j).put("dequantize", false),
                        "key 'dequantize' is not supported"),
                refusal("e5m2", BLOCK, j -> quantization(j).put("fmt", "e5m2"), "'fmt' 'e5m2' is not supported"),
                refusal("other scale format", BLOCK, j -> quantization(j).put("scale_fmt", "ue4m3"),
                        "'scale_fmt' 'ue4m3' is not supported; supported: ue8m0"),
                refusal("static activations", BLOCK, j -> quantization(j).put("activation_scheme", "static"),
                        "activation_scheme 'static'"),
                refusal("1-D blocks", BLOCK, j -> quantization(j).putArray("weight_block_size").add(128),
                        "'weight_block_size' must be two positive sizes"),
                refusal("no blocks", BLOCK, j -> quantization(j).remove("weight_block_size"),
                        "'weight_block_size' is missing"),
                refusal("skip list not a list", BLOCK, j -> quantization(j).put("modules_to_not_convert", "lm_head"),
                        "'modules_to_not_convert' must be a list"),
                refusal("static input scales", CHANNEL, j -> ((ObjectNode) quantization(j).get("config_groups")
                        .get("group_0").get("input_activations")).put("dynamic", false), "'dynamic' false"),
                refusal("block strategy", CHANNEL, j -> weights(j).put("strategy", "block"),
                        "'strategy' 'block' is not supported; supported: channel, tensor"),
                refusal("int8", CHANNEL, j -> weights(j).put("type", "int"), "'type' 'int' is not supported"),
                refusal("4 bits", CHANNEL, j -> weights(j).put("num_bits", 4), "'num_bits' 4 is not supported"),
                refusal("asymmetric", CHANNEL, j -> weights(j).put("symmetric", false), "'symmetric' false"),
                refusal("groups", CHANNEL, j -> weights(j).put("group_size", 128), "'group_size' 128"),
                refusal("unknown weights key", CHANNEL, j -> weights(j).put("zp_dtype", "int8"),
                        "key 'zp_dtype' is not supported"),
                refusal("fp8 kv cache", CHANNEL, j -> quantization(j).putObject("kv_cache_scheme").put("num_bits", 8),
                        "'kv_cache_scheme'"),
                refusal("packed format", CHANNEL, j -> quantization(j).put("format", "pack-quantized"),
                        "'format' 'pack-quantized' is not supported; supported: float-quantized"),
                refusal("two schemes", CHANNEL, j -> ((ObjectNode) quantization(j).get("config_groups"))
                        .set("group_1", quantization(j).get("config_groups").get("group_0")), "exactly one scheme"),
                refusal("attention targets", CHANNEL, j -> ((ObjectNode) quantization(j).get("config_groups")
                        .get("group_0")).putArray("targets").add("Attention"), "'targets' must be [\"Linear\"]"),
                refusal("output activations", CHANNEL, j -> ((ObjectNode) quantization(j).get("config_groups")
                        .get("group_0")).putObject("output_activations").put("num_bits", 8), "'output_activations'"));
    }

    private static Arguments refusal(String name, String base, Consumer<ObjectNode> change, String message) {
        return Arguments.of(name, base, change, message);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("refusals")
    void everyRefusedKeyIsNamedInOneLine(String name, String base, Consumer<ObjectNode> change, String message)
            throws IOException {
        ObjectNode json = config(base);
        change.accept(json);
        assertThatThrownBy(() -> parse(json)).isInstanceOf(ModelFormatException.class)
                .hasMessageStartingWith("test config.json quantization_config")
                .hasMessageContaining(message)
                .satisfies(e -> assertThat(e.getMessage()).doesNotContain("\n"));
    }
}
