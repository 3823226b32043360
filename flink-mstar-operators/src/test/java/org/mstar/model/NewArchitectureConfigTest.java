package org.mstar.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.RopeParams;

/**
 * config.json of Qwen3, Gemma 3 (text) and Phi-3/Phi-4: the transformers 5 files of the test fixtures, the older
 * layout the published Gemma 3 checkpoints use, and every key these architectures add either honoured or refused
 * by name.
 */
class NewArchitectureConfigTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static ObjectNode fixture(String arch) throws IOException, URISyntaxException {
        Path dir = Path.of(NewArchitectureConfigTest.class.getResource("fixtures/" + arch).toURI());
        return (ObjectNode) JSON.readTree(dir.resolve("config.json").toFile());
    }

    private static ModelConfig parse(ObjectNode json) {
        return ModelConfig.fromJson(json, "test config.json");
    }

    /** Gemma 3 1B's published config.json layout (before transformers 5 moved RoPE into rope_parameters). */
    private static ObjectNode gemma3OneBillion() throws IOException {
        return (ObjectNode) JSON.readTree("""
                {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 1152,
                 "intermediate_size": 6912, "num_hidden_layers": 26, "num_attention_heads": 4, "num_key_value_heads": 1,
                 "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256,
                 "sliding_window": 512, "sliding_window_pattern": 6, "rope_theta": 1000000, "rope_local_base_freq": 10000,
                 "rope_scaling": null, "final_logit_softcapping": null, "attn_logit_softcapping": null,
                 "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "vocab_size": 262144, "bos_token_id": 2,
                 "eos_token_id": [1, 106], "pad_token_id": 0, "torch_dtype": "bfloat16", "attention_bias": false}
                """);
    }

    @Test
    void qwen3NormsEachHeadAndKeepsItsOwnHeadDim() throws Exception {
        ModelConfig c = parse(fixture("qwen3"));
        assertThat(c.architecture()).isEqualTo(Architecture.QWEN3);
        assertThat(c.headDim()).isEqualTo(32);
        assertThat(c.qSize()).isEqualTo(4 * 32).isNotEqualTo(c.hiddenSize());
        assertThat(c.qkNorm()).isTrue();
        assertThat(c.qkvBias()).isFalse();
        assertThat(c.sandwichNorms()).isFalse();
        assertThat(c.ropeTheta()).isEqualTo(1_000_000);
        assertThat(c.attentionWindow(2)).isZero();
    }

    @Test
    void gemma3OfTransformers5HasOneRopePerLayerType() throws Exception {
        ModelConfig c = parse(fixture("gemma3_text"));
        assertThat(c.architecture()).isEqualTo(Architecture.GEMMA3);
        assertThat(c.windowedLayers()).containsExactly(true, true, false, true);
        assertThat(c.attentionWindow(1)).isEqualTo(16);
        assertThat(c.attentionWindow(2)).isZero();
        assertThat(c.ropeParams(2).theta()).isEqualTo(1_000_000);
        assertThat(c.ropeParams(2).scale()).isEqualTo(8);
        assertThat(c.ropeParams(0)).isEqualTo(RopeParams.standard(32, 10_000));
        assertThat(c.attentionScale()).isEqualTo(1 / Math.sqrt(24));
        assertThat(c.embeddingScale()).isEqualTo((float) Math.sqrt(64));
        assertThat(c.normWeightOffset()).isEqualTo(1f);
        assertThat(c.tieWordEmbeddings()).isTrue();
        assertThat(c.geluTanhMlp()).isTrue();
    }

    @Test
    void gemma3PublishedLayoutMakesEverySixthLayerGlobal() throws IOException {
        ModelConfig c = parse(gemma3OneBillion());
        for (int l = 0; l < 26; l++) {
            assertThat(c.attentionWindow(l)).as("layer %d", l).isEqualTo((l + 1) % 6 == 0 ? 0 : 512);
        }
        assertThat(c.localRopeTheta()).isEqualTo(10_000);
        assertThat(c.ropeParams(5).theta()).isEqualTo(1_000_000);
        assertThat(c.ropeParams(4).theta()).isEqualTo(10_000);
        assertThat(c.eosTokenIds()).containsExactly(1, 106);
        assertThat(c.tieWordEmbeddings()).as("Gemma ties by default").isTrue();
    }

    @Test
    void phi3FusesItsProjectionsAndRotatesPartOfEachHead() throws Exception {
        ModelConfig c = parse(fixture("phi3"));
        assertThat(c.architecture()).isEqualTo(Architecture.PHI3);
        assertThat(c.fusedCheckpointProjections()).isTrue();
        assertThat(c.rotaryDim()).isEqualTo(8);
        assertThat(c.attentionWindow(0)).isEqualTo(24);
        assertThat(c.attentionWindow(2)).isEqualTo(24);
    }

    @ParameterizedTest
    @ValueSource(strings = {"qwen3", "gemma3_text", "phi3"})
    void writtenJsonReadsBackEqual(String arch) throws Exception {
        ModelConfig c = parse(fixture(arch));
        assertThat(parse(c.toJson())).isEqualTo(c);
    }

    @Test
    void gemma3FeaturesItDoesNotHaveAreRefusedByName() throws IOException {
        for (String key : List.of("final_logit_softcapping", "attn_logit_softcapping")) {
            ObjectNode json = gemma3OneBillion().put(key, 30.0);
            assertThatThrownBy(() -> parse(json)).isInstanceOf(ModelFormatException.class).hasMessageContaining(key);
        }
        assertThatThrownBy(() -> parse(gemma3OneBillion().put("use_bidirectional_attention", true)))
                .hasMessageContaining("use_bidirectional_attention");
        assertThatThrownBy(() -> parse(gemma3OneBillion().put("hidden_activation", "gelu")))
                .hasMessageContaining("hidden_activation 'gelu'");
        assertThatThrownBy(() -> parse(gemma3OneBillion().put("hidden_act", "silu")))
                .hasMessageContaining("hidden_act 'silu'");
        ObjectNode typo = gemma3OneBillion();
        typo.putArray("layer_types").add("chunked_attention");
        assertThatThrownBy(() -> parse(typo)).hasMessageContaining("chunked_attention");
        ObjectNode scaledLocal = gemma3OneBillion();
        scaledLocal.putObject("rope_parameters").<ObjectNode>putObject("full_attention").put("rope_theta", 1e6);
        ((ObjectNode) scaledLocal.get("rope_parameters")).putObject("sliding_attention").put("rope_type", "linear")
                .put("factor", 2.0);
        assertThatThrownBy(() -> parse(scaledLocal)).hasMessageContaining("sliding_attention");
    }

    @Test
    void layerTypesMustMatchTheLayersAndNeedAWindow() throws Exception {
        ObjectNode wrongCount = fixture("gemma3_text");
        wrongCount.putArray("layer_types").add("full_attention");
        assertThatThrownBy(() -> parse(wrongCount)).hasMessageContaining("layer_types names 1 layers");
        ObjectNode noWindow = fixture("qwen3");
        noWindow.putArray("layer_types").add("sliding_attention").add("full_attention").add("full_attention");
        assertThatThrownBy(() -> parse(noWindow)).hasMessageContaining("sliding_window is not set");
    }

    @Test
    void phi3LongRopeAndBiasesAreRefusedByName() throws Exception {
        ObjectNode longrope = fixture("phi3");
        longrope.remove("rope_parameters");
        longrope.putObject("rope_scaling").put("type", "longrope");
        assertThatThrownBy(() -> parse(longrope)).hasMessageContaining("'longrope' is not supported");
        assertThatThrownBy(() -> parse(fixture("phi3").put("attention_bias", true))).hasMessageContaining("attention_bias");
        assertThatThrownBy(() -> parse(fixture("qwen3").put("attention_bias", true))).hasMessageContaining("attention_bias");
        assertThatThrownBy(() -> parse(fixture("qwen3").put("hidden_act", "gelu"))).hasMessageContaining("hidden_act 'gelu'");
    }

    @Test
    void perLayerTypeRopeIsOnlyGemmas() throws Exception {
        ObjectNode json = fixture("qwen3");
        json.putObject("rope_parameters").putObject("full_attention").put("rope_theta", 1e6);
        assertThatThrownBy(() -> parse(json)).hasMessageContaining("rope_parameters per layer type");
    }
}
