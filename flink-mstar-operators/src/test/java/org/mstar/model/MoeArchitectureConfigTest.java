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
import org.mstar.device.MoeRouting;

/**
 * config.json of OLMoE and Qwen3-MoE: the transformers 5 files of the test fixtures, and every key these
 * architectures add either honoured or refused by name.
 */
class MoeArchitectureConfigTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static ObjectNode fixture(String arch) throws IOException, URISyntaxException {
        Path dir = Path.of(MoeArchitectureConfigTest.class.getResource("fixtures/" + arch).toURI());
        return (ObjectNode) JSON.readTree(dir.resolve("config.json").toFile());
    }

    private static ModelConfig parse(ObjectNode json) {
        return ModelConfig.fromJson(json, "test config.json");
    }

    @Test
    void olmoeRoutesEveryLayerAndNormsTheWholeProjection() throws Exception {
        ModelConfig c = parse(fixture("olmoe"));
        assertThat(c.architecture()).isEqualTo(Architecture.OLMOE);
        MoeConfig moe = c.moe().orElseThrow();
        assertThat(moe.numExperts()).isEqualTo(8);
        assertThat(moe.expertIntermediateSize()).isEqualTo(48);
        assertThat(moe.routing()).isEqualTo(MoeRouting.softmaxTopK(2, false));
        assertThat(moe.sparseLayers()).containsExactly(true, true, true);
        assertThat(c.qkNorm()).isTrue();
        assertThat(c.qNormSize()).isEqualTo(c.qSize()).isEqualTo(64);
        assertThat(c.kNormSize()).isEqualTo(c.kvSize()).isEqualTo(32);
    }

    @Test
    void qwen3MoeKeepsItsMlpOnlyLayersDense() throws Exception {
        ModelConfig c = parse(fixture("qwen3_moe"));
        assertThat(c.architecture()).isEqualTo(Architecture.QWEN3_MOE);
        MoeConfig moe = c.moe().orElseThrow();
        assertThat(moe.numExperts()).as("num_local_experts").isEqualTo(8);
        assertThat(moe.expertIntermediateSize()).as("moe_intermediate_size").isEqualTo(40);
        assertThat(c.intermediateSize()).as("the dense layers' width").isEqualTo(96);
        assertThat(moe.routing()).isEqualTo(MoeRouting.softmaxTopK(2, true));
        assertThat(moe.sparseLayers()).containsExactly(true, true, false, true);
        assertThat(c.qNormSize()).isEqualTo(c.headDim()).isEqualTo(32);
    }

    @Test
    void decoderSparseStepMakesOnlyEveryNthLayerSparse() throws Exception {
        ObjectNode json = fixture("qwen3_moe").put("decoder_sparse_step", 2);
        json.putArray("mlp_only_layers");
        assertThat(parse(json).moe().orElseThrow().sparseLayers()).containsExactly(false, true, false, true);
    }

    @Test
    void transformersDefaultsApplyToAbsentKeys() throws Exception {
        ObjectNode olmoe = fixture("olmoe");
        olmoe.remove(List.of("num_experts", "num_experts_per_tok", "norm_topk_prob"));
        MoeConfig moe = parse(olmoe).moe().orElseThrow();
        assertThat(moe.numExperts()).isEqualTo(64);
        assertThat(moe.routing()).isEqualTo(MoeRouting.softmaxTopK(8, false));
        ObjectNode qwen = fixture("qwen3_moe");
        qwen.remove(List.of("num_local_experts", "moe_intermediate_size", "mlp_only_layers",
                "decoder_sparse_step", "num_experts_per_tok"));
        MoeConfig q = parse(qwen).moe().orElseThrow();
        assertThat(q.numExperts()).isEqualTo(128);
        assertThat(q.expertIntermediateSize()).isEqualTo(768);
        assertThat(q.sparseLayers()).containsOnly(true);
    }

    @ParameterizedTest
    @ValueSource(strings = {"olmoe", "qwen3_moe"})
    void writtenJsonReadsBackEqual(String arch) throws Exception {
        ModelConfig c = parse(fixture(arch));
        assertThat(parse(c.toJson())).isEqualTo(c);
    }

    @ParameterizedTest
    @ValueSource(strings = {"olmoe", "qwen3_moe"})
    void trainingOnlyKeysAreIgnored(String arch) throws Exception {
        ModelConfig c = parse(fixture(arch));
        ObjectNode json = fixture(arch).put("output_router_logits", true).put("router_aux_loss_coef", 0.5);
        assertThat(parse(json)).isEqualTo(c);
    }

    @Test
    void featuresTheyDoNotHaveAreRefusedByName() throws Exception {
        assertThatThrownBy(() -> parse(fixture("olmoe").put("clip_qkv", 8.0))).isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("clip_qkv 8.0");
        assertThatThrownBy(() -> parse(fixture("qwen3_moe").put("use_sliding_window", true)))
                .hasMessageContaining("use_sliding_window=true");
        assertThatThrownBy(() -> parse(fixture("qwen3_moe").put("num_experts", 16)))
                .hasMessageContaining("num_experts 16 and num_local_experts 8 disagree");
        assertThatThrownBy(() -> parse(fixture("qwen3_moe").put("decoder_sparse_step", 0)))
                .hasMessageContaining("decoder_sparse_step must be >= 1");
        ObjectNode badLayer = fixture("qwen3_moe");
        badLayer.putArray("mlp_only_layers").add(4);
        assertThatThrownBy(() -> parse(badLayer)).hasMessageContaining("mlp_only_layers names layer 4");
        assertThatThrownBy(() -> parse(fixture("olmoe").put("num_experts_per_tok", 9)))
                .hasMessageContaining("num_experts_per_tok 9 exceeds num_experts 8");
        assertThatThrownBy(() -> parse(fixture("olmoe").put("attention_bias", true)))
                .hasMessageContaining("attention_bias=true");
        assertThatThrownBy(() -> parse(fixture("olmoe").put("hidden_act", "gelu")))
                .hasMessageContaining("hidden_act 'gelu'");
    }

    @Test
    void onlyTheMixtureArchitecturesTakeExperts() {
        MoeConfig moe = new MoeConfig(4, 8, MoeRouting.softmaxTopK(2, false), List.of(true));
        assertThatThrownBy(() -> ModelConfig.builder(Architecture.QWEN3).hiddenSize(16).intermediateSize(8).numLayers(1)
                .numHeads(2).maxPositionEmbeddings(8).vocabSize(8).moe(moe).build())
                .hasMessageContaining("Qwen3ForCausalLM has no routed experts");
        assertThatThrownBy(() -> ModelConfig.builder(Architecture.OLMOE).hiddenSize(16).intermediateSize(8).numLayers(1)
                .numHeads(2).maxPositionEmbeddings(8).vocabSize(8).build())
                .hasMessageContaining("OlmoeForCausalLM needs routed experts");
        assertThatThrownBy(() -> ModelConfig.builder(Architecture.OLMOE).hiddenSize(16).intermediateSize(8).numLayers(1)
                .numHeads(2).maxPositionEmbeddings(8).vocabSize(8).moe(new MoeConfig(4, 6, MoeRouting.softmaxTopK(2,
                        false), List.of(true))).build())
                .hasMessageContaining("OLMoE's experts are intermediate_size 8 wide, got 6");
        // shared experts are DeepSeek-V2's: their config.json has no key for them
        assertThatThrownBy(() -> ModelConfig.builder(Architecture.OLMOE).hiddenSize(16).intermediateSize(8).numLayers(1)
                .numHeads(2).maxPositionEmbeddings(8).vocabSize(8).moe(new MoeConfig(4, 8, MoeRouting.softmaxTopK(2,
                        false), List.of(true), 16)).build())
                .hasMessageContaining("OlmoeForCausalLM has no shared experts");
    }
}
