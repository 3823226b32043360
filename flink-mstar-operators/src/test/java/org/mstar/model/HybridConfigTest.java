package org.mstar.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.Mamba2Shape;

/**
 * config.json of Mamba2 and Bamba: the transformers 5 files of the test fixtures, read into the mixer's geometry and
 * Bamba's attention layers, and every key that would change the forward and is not supported refused by name.
 */
class HybridConfigTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static ObjectNode fixture(String arch) throws IOException, URISyntaxException {
        Path dir = Path.of(HybridConfigTest.class.getResource("fixtures/" + arch).toURI());
        return (ObjectNode) JSON.readTree(dir.resolve("config.json").toFile());
    }

    private static HybridConfig parse(ObjectNode json) {
        return HybridConfig.parse(new ConfigFields(json, "test config.json"));
    }

    @Test
    void mamba2ReadsItsMixerGeometry() throws Exception {
        HybridConfig c = parse(fixture("mamba2"));
        assertThat(c.family()).isEqualTo(HybridConfig.Family.MAMBA2);
        assertThat(c.mixer()).isEqualTo(new Mamba2Shape(8, 16, 2, 16, 4, 16, 0f, Float.POSITIVE_INFINITY));
        assertThat(c.mixer().projWidth()).isEqualTo(328);
        assertThat(c.mambaLayers()).containsExactly(0, 1, 2);
        assertThat(c.attentionLayers()).isEmpty();
        assertThat(c.intermediateSize()).isZero();
        assertThat(c.normEps()).isEqualTo(1e-5);
        assertThat(c.convBias()).isTrue();
        assertThat(c.eosTokenIds()).containsExactly(2);
    }

    @Test
    void bambaReadsItsAttentionLayersAndPartialRope() throws Exception {
        HybridConfig c = parse(fixture("bamba"));
        assertThat(c.family()).isEqualTo(HybridConfig.Family.BAMBA);
        assertThat(c.attentionLayers()).containsExactly(1);
        assertThat(c.mambaLayers()).containsExactly(0, 2, 3);
        assertThat(c.attentionHeads()).isEqualTo(4);
        assertThat(c.kvHeads()).isEqualTo(2);
        assertThat(c.attentionHeadDim()).isEqualTo(16);
        assertThat(c.rotaryDim()).isEqualTo(8);
        assertThat(c.ropeTheta()).isEqualTo(10_000);
        assertThat(c.intermediateSize()).isEqualTo(96);
        assertThat(c.mixer().groups()).isEqualTo(2);
        assertThat(c.normEps()).isEqualTo(1e-6);
    }

    @Test
    void aFiniteTimeStepLimitClampsTheStepSize() throws Exception {
        ObjectNode json = fixture("mamba2");
        json.putArray("time_step_limit").add(0.001).add(0.5);
        Mamba2Shape s = parse(json).mixer();
        assertThat(s.dtMin()).isEqualTo(0.001f);
        assertThat(s.dtMax()).isEqualTo(0.5f);
    }

    @ParameterizedTest
    @ValueSource(strings = {"use_bias", "norm_before_gate", "rms_norm", "residual_in_fp32"})
    void mamba2RefusesWhatItDoesNotComputeByName(String key) throws Exception {
        ObjectNode json = fixture("mamba2");
        json.put(key, !key.equals("use_bias") && !key.equals("norm_before_gate") ? false : true);
        assertThatThrownBy(() -> parse(json)).isInstanceOf(ModelFormatException.class).hasMessageContaining(key);
    }

    @ParameterizedTest
    @ValueSource(strings = {"attention_bias", "mlp_bias", "mamba_proj_bias"})
    void bambaRefusesBiasesByName(String key) throws Exception {
        ObjectNode json = fixture("bamba");
        json.put(key, true);
        assertThatThrownBy(() -> parse(json)).isInstanceOf(ModelFormatException.class).hasMessageContaining(key);
    }

    @Test
    void bambaRefusesOtherRopeTypesAndAnAttentionLayerOutOfRange() throws Exception {
        ObjectNode scaled = fixture("bamba");
        ((ObjectNode) scaled.get("rope_parameters")).put("rope_type", "yarn");
        assertThatThrownBy(() -> parse(scaled)).hasMessageContaining("rope_type 'yarn'");
        ObjectNode outOfRange = fixture("bamba");
        outOfRange.putArray("attn_layer_indices").add(1).add(4);
        assertThatThrownBy(() -> parse(outOfRange)).hasMessageContaining("layer 4 of 4");
    }

    @Test
    void aMixerWhoseHeadsDoNotFillItsWidthIsRefused() throws Exception {
        ObjectNode json = fixture("mamba2");
        json.put("head_dim", 8);
        assertThatThrownBy(() -> parse(json)).hasMessageContaining("is not its 8 heads of 8");
    }

    @Test
    void otherActivationsAndArchitecturesAreRefused() throws Exception {
        ObjectNode gelu = fixture("mamba2");
        gelu.put("hidden_act", "gelu");
        assertThatThrownBy(() -> parse(gelu)).hasMessageContaining("hidden_act 'gelu'");
        ObjectNode llama = fixture("mamba2");
        llama.putArray("architectures").add("LlamaForCausalLM");
        assertThatThrownBy(() -> parse(llama)).hasMessageContaining("not Mamba2ForCausalLM or BambaForCausalLM");
    }
}
