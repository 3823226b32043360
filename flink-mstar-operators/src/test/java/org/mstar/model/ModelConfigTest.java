package org.mstar.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.DType;
import org.mstar.device.RopeParams;

class ModelConfigTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    static Path sample(String name) {
        try {
            return Path.of(ModelConfigTest.class.getResource("configs/" + name).toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    private static ObjectNode sampleJson(String name) throws IOException {
        return (ObjectNode) JSON.readTree(sample(name).resolve("config.json").toFile());
    }

    private static ModelConfig parse(ObjectNode json) {
        return ModelConfig.fromJson(json, "test config.json");
    }

    @Test
    void llama31InstructHasLlama3RopeScalingAndThreeEndTokens() throws IOException {
        ModelConfig c = ModelConfig.load(sample("llama-3.1-8b-instruct"));

        assertThat(c.architecture()).isEqualTo(Architecture.LLAMA);
        assertThat(c.hiddenSize()).isEqualTo(4096);
        assertThat(c.intermediateSize()).isEqualTo(14336);
        assertThat(c.numLayers()).isEqualTo(32);
        assertThat(c.numHeads()).isEqualTo(32);
        assertThat(c.numKvHeads()).isEqualTo(8);
        assertThat(c.headDim()).isEqualTo(128);
        assertThat(c.qkvRows()).isEqualTo((32 + 2 * 8) * 128);
        assertThat(c.rmsNormEps()).isEqualTo(1e-5);
        assertThat(c.ropeTheta()).isEqualTo(500_000);
        assertThat(c.ropeScaling()).isEqualTo(RopeScaling.llama3(8, 1, 4, 8192));
        assertThat(c.maxPositionEmbeddings()).isEqualTo(131_072);
        assertThat(c.vocabSize()).isEqualTo(128_256);
        assertThat(c.tieWordEmbeddings()).isFalse();
        assertThat(c.qkvBias()).isFalse();
        assertThat(c.attentionWindow(31)).isZero();
        assertThat(c.bosTokenId()).hasValue(128_000);
        assertThat(c.eosTokenIds()).containsExactly(128_001, 128_008, 128_009);
        assertThat(c.dtype()).isEqualTo(DType.BF16);

        RopeParams rope = c.ropeParams();
        assertThat(rope).isEqualTo(new RopeParams(128, false, 500_000, 8, true, 1, 4, 8192));
    }

    @Test
    void llama32OneBillionIsTiedWithExplicitHeadDim() throws IOException {
        ModelConfig c = ModelConfig.load(sample("llama-3.2-1b").resolve("config.json"));

        assertThat(c.tieWordEmbeddings()).isTrue();
        assertThat(c.headDim()).isEqualTo(64);
        assertThat(c.numLayers()).isEqualTo(16);
        assertThat(c.ropeScaling().factor()).isEqualTo(32);
        assertThat(c.eosTokenIds()).containsExactly(128_001);
    }

    @Test
    void qwen25HasQkvBiasAndNoWindowUnlessEnabled() throws IOException {
        ModelConfig c = ModelConfig.load(sample("qwen2.5-7b-instruct"));

        assertThat(c.architecture()).isEqualTo(Architecture.QWEN2);
        assertThat(c.qkvBias()).isTrue();
        assertThat(c.headDim()).isEqualTo(3584 / 28);
        assertThat(c.numKvHeads()).isEqualTo(4);
        assertThat(c.rmsNormEps()).isEqualTo(1e-6);
        assertThat(c.ropeTheta()).isEqualTo(1_000_000);
        assertThat(c.ropeScaling().kind()).isEqualTo(RopeScaling.Kind.NONE);
        assertThat(c.slidingWindow()).isZero();
        assertThat(c.vocabSize()).isEqualTo(152_064);

        ModelConfig small = ModelConfig.load(sample("qwen2.5-0.5b-instruct"));
        assertThat(small.tieWordEmbeddings()).isTrue();
        assertThat(small.headDim()).isEqualTo(64);
    }

    @Test
    void qwen2SlidingWindowAppliesFromMaxWindowLayersOn() throws IOException {
        ObjectNode json = sampleJson("qwen2.5-7b-instruct");
        json.put("use_sliding_window", true).put("sliding_window", 4096).put("max_window_layers", 20);

        ModelConfig c = parse(json);

        assertThat(c.attentionWindow(19)).isZero();
        assertThat(c.attentionWindow(20)).isEqualTo(4096);
        assertThat(parse(c.toJson())).isEqualTo(c);
    }

    @Test
    void mistralSlidesOverEveryLayer() throws IOException {
        ModelConfig c = ModelConfig.load(sample("mistral-7b-v0.1"));

        assertThat(c.architecture()).isEqualTo(Architecture.MISTRAL);
        assertThat(c.slidingWindow()).isEqualTo(4096);
        assertThat(c.attentionWindow(0)).isEqualTo(4096);
        assertThat(c.ropeTheta()).isEqualTo(10_000);
        assertThat(c.bosTokenId()).hasValue(1);
        assertThat(c.eosTokenIds()).containsExactly(2);
        assertThat(c.vocabSize()).isEqualTo(32_000);
    }

    @Test
    void mistralWindowIsNoneWhenNullAndTheClassDefaultWhenAbsent() throws IOException {
        ObjectNode json = sampleJson("mistral-7b-v0.1");
        json.putNull("sliding_window");
        assertThat(parse(json).slidingWindow()).isZero();
        json.remove("sliding_window");
        assertThat(parse(json).slidingWindow()).isEqualTo(4096);
    }

    @ParameterizedTest
    @ValueSource(strings = {"llama-3.1-8b-instruct", "llama-3.2-1b", "qwen2.5-7b-instruct", "qwen2.5-0.5b-instruct",
            "mistral-7b-v0.1"})
    void writtenJsonReadsBackEqual(String name) throws IOException {
        ModelConfig c = ModelConfig.load(sample(name));
        assertThat(parse(c.toJson())).isEqualTo(c);
    }

    @Test
    void linearScalingUnderTheOldTypeKey() throws IOException {
        ObjectNode json = sampleJson("mistral-7b-v0.1");
        json.putObject("rope_scaling").put("type", "linear").put("factor", 4.0);

        ModelConfig c = parse(json);

        assertThat(c.ropeScaling()).isEqualTo(RopeScaling.linear(4));
        assertThat(c.ropeParams().invFreq(1)).isEqualTo(RopeParams.standard(128, 10_000).invFreq(1) / 4);
        assertThat(parse(c.toJson())).isEqualTo(c);
    }

    @Test
    void ropeParametersOfTransformers5() throws IOException {
        ObjectNode json = sampleJson("llama-3.2-1b");
        json.remove("rope_theta");
        json.remove("rope_scaling");
        json.putObject("rope_parameters").put("rope_type", "llama3").put("rope_theta", 500000.0).put("factor", 32.0)
                .put("low_freq_factor", 1.0).put("high_freq_factor", 4.0).put("original_max_position_embeddings", 8192);
        json.remove("torch_dtype");
        json.put("dtype", "bfloat16");

        assertThat(parse(json)).isEqualTo(ModelConfig.load(sample("llama-3.2-1b")));
    }

    @Test
    void partialRotaryFactorNarrowsTheRotatedDims() throws IOException {
        ObjectNode json = sampleJson("llama-3.2-1b").put("partial_rotary_factor", 0.5);
        ModelConfig c = parse(json);
        assertThat(c.rotaryDim()).isEqualTo(32);
        assertThat(c.ropeParams().rotaryDim()).isEqualTo(32);
        assertThat(parse(c.toJson())).isEqualTo(c);
    }

    @Test
    void unknownArchitectureIsNamed() throws IOException {
        ObjectNode json = sampleJson("llama-3.2-1b");
        json.putArray("architectures").add("GPT2LMHeadModel");

        assertThatThrownBy(() -> parse(json))
                .isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("test config.json")
                .hasMessageContaining("unsupported architecture 'GPT2LMHeadModel'")
                .hasMessageContaining("LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM");
    }

    @Test
    void unsupportedFeaturesAreNamed() throws IOException {
        ObjectNode yarn = sampleJson("qwen2.5-7b-instruct");
        yarn.putObject("rope_scaling").put("type", "yarn").put("factor", 4.0);
        assertThatThrownBy(() -> parse(yarn)).hasMessageContaining("rope scaling type 'yarn' is not supported");

        ObjectNode gelu = sampleJson("llama-3.2-1b").put("hidden_act", "gelu");
        assertThatThrownBy(() -> parse(gelu)).hasMessageContaining("hidden_act 'gelu'");

        ObjectNode bias = sampleJson("llama-3.2-1b").put("attention_bias", true);
        assertThatThrownBy(() -> parse(bias)).hasMessageContaining("attention_bias=true");

        ObjectNode fp8 = sampleJson("llama-3.2-1b").put("torch_dtype", "float8_e4m3fn");
        assertThatThrownBy(() -> parse(fp8)).hasMessageContaining("torch_dtype 'float8_e4m3fn'");
    }

    @Test
    void missingOrIllTypedKeysAreNamed() throws IOException {
        ObjectNode missing = sampleJson("llama-3.2-1b");
        missing.remove("vocab_size");
        assertThatThrownBy(() -> parse(missing)).isInstanceOf(ModelFormatException.class)
                .hasMessage("test config.json: missing required key 'vocab_size'");

        ObjectNode text = sampleJson("llama-3.2-1b").put("hidden_size", "large");
        assertThatThrownBy(() -> parse(text)).hasMessageContaining("'hidden_size' must be an integer, got \"large\"");

        ObjectNode heads = sampleJson("llama-3.2-1b").put("num_key_value_heads", 5);
        assertThatThrownBy(() -> parse(heads)).hasMessageContaining("num_attention_heads (32) must be a multiple of "
                + "num_key_value_heads (5)");

        ObjectNode eos = sampleJson("llama-3.2-1b").put("eos_token_id", 200_000);
        assertThatThrownBy(() -> parse(eos)).hasMessageContaining("eos_token_id 200000 is outside the vocabulary");
    }

    @Test
    void generationConfigPrefersItsOwnEndTokens() throws IOException {
        Path folder = sample("qwen2.5-7b-instruct");
        ModelConfig c = ModelConfig.load(folder);

        GenerationConfig g = GenerationConfig.load(folder, c);

        assertThat(c.eosTokenIds()).containsExactly(151_645);
        assertThat(g.eosTokenIds()).containsExactly(151_645, 151_643);
        assertThat(g.bosTokenId()).hasValue(151_643);
        assertThat(g.isEos(151_643)).isTrue();
        assertThat(g.isEos(0)).isFalse();
    }

    @Test
    void generationConfigFallsBackToConfigJson(@TempDir Path dir) throws IOException {
        ModelConfig c = ModelConfig.load(sample("mistral-7b-v0.1"));
        assertThat(GenerationConfig.load(dir, c)).isEqualTo(new GenerationConfig(OptionalInt.of(1), List.of(2)));

        Files.writeString(dir.resolve(GenerationConfig.FILE_NAME), "{\"do_sample\": true, \"eos_token_id\": null}");
        assertThat(GenerationConfig.load(dir, c)).isEqualTo(GenerationConfig.of(c));

        GenerationConfig many = new GenerationConfig(OptionalInt.empty(), List.of(7, 9));
        JSON.writeValue(dir.resolve(GenerationConfig.FILE_NAME).toFile(), many.toJson());
        assertThat(GenerationConfig.load(dir, c)).isEqualTo(new GenerationConfig(OptionalInt.of(1), List.of(7, 9)));
    }

    @Test
    void builderDerivesHeadDimAndKvHeads() {
        ModelConfig c = ModelConfig.builder(Architecture.LLAMA).hiddenSize(64).intermediateSize(128).numLayers(2)
                .numHeads(4).maxPositionEmbeddings(256).vocabSize(300).build();

        assertThat(c.headDim()).isEqualTo(16);
        assertThat(c.numKvHeads()).isEqualTo(4);
        assertThat(c.dtype()).isEqualTo(DType.BF16);
        assertThat(parse(c.toJson())).isEqualTo(c);
        assertThatThrownBy(() -> c.toBuilder().slidingWindow(64, 0).build())
                .hasMessageContaining("LlamaForCausalLM has no sliding window");
        assertThatThrownBy(() -> c.toBuilder().architecture(Architecture.MISTRAL).slidingWindow(64, 1).build())
                .hasMessageContaining("MistralForCausalLM slides over every layer");
    }
}
