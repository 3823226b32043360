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
import org.mstar.device.MoeRouting;
import org.mstar.device.RopeParams;

/**
 * config.json of DeepSeek-V2: the transformers 5 fixtures, DeepSeek-V2-Lite's published layout, and every key either
 * honoured or refused by name, its latent attention's and its experts'.
 */
class DeepseekV2ConfigTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static ObjectNode fixture(String name) throws IOException, URISyntaxException {
        Path dir = Path.of(DeepseekV2ConfigTest.class.getResource("fixtures/" + name).toURI());
        return (ObjectNode) JSON.readTree(dir.resolve("config.json").toFile());
    }

    private static ModelConfig parse(ObjectNode json) {
        return ModelConfig.fromJson(json, "test config.json");
    }

    /** DeepSeek-V2-Lite's published config.json (its remote-code layout), its layers made dense and yarn removed. */
    private static ObjectNode liteDense() throws IOException {
        return (ObjectNode) JSON.readTree("""
                {"architectures": ["DeepseekV2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
                 "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV2Config"}, "aux_loss_alpha": 0.001,
                 "bos_token_id": 100000, "eos_token_id": 100001, "ep_size": 1, "first_k_dense_replace": 27,
                 "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 10944,
                 "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v2",
                 "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 64,
                 "n_shared_experts": 2, "norm_topk_prob": false, "num_attention_heads": 16, "num_experts_per_tok": 6,
                 "num_hidden_layers": 27, "num_key_value_heads": 16, "pretraining_tp": 1, "q_lora_rank": null,
                 "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06, "rope_theta": 10000,
                 "routed_scaling_factor": 1.0, "scoring_func": "softmax", "seq_aux": true, "tie_word_embeddings": false,
                 "topk_group": 1, "topk_method": "greedy", "torch_dtype": "bfloat16", "transformers_version": "4.33.1",
                 "use_cache": true, "v_head_dim": 128, "vocab_size": 102400}
                """);
    }

    /** DeepSeek-V2-Lite's published config.json as it is: a dense first layer, experts after. */
    private static ObjectNode lite() throws IOException {
        return liteDense().put("first_k_dense_replace", 1);
    }

    @Test
    void theDenseFixtureHasLatentAttentionAndInterleavedRope() throws Exception {
        ModelConfig c = parse(fixture("deepseek_v2_dense"));
        assertThat(c.architecture()).isEqualTo(Architecture.DEEPSEEK_V2);
        assertThat(c.latentAttention()).contains(new LatentAttention(0, 32, 32, 16, 32));
        assertThat(c.headDim()).isEqualTo(16);
        assertThat(c.kvValuesPerToken()).isEqualTo(48);
        assertThat(c.attentionScale()).isEqualTo(1 / Math.sqrt(48));
        assertThat(c.ropeParams()).isEqualTo(new RopeParams(16, true, 10_000, 1, false, 0, 0, 0));
    }

    @Test
    void liteGeometryReadsFromItsPublishedLayout() throws IOException {
        ModelConfig c = parse(liteDense());
        assertThat(c.latentAttention()).contains(new LatentAttention(0, 512, 128, 64, 128));
        assertThat(c.kvValuesPerToken()).isEqualTo(576);
        assertThat(c.attentionScale()).isEqualTo(1 / Math.sqrt(192));
    }

    @Test
    void absentKeysTakeTransformersDefaults() throws IOException {
        ObjectNode json = liteDense();
        for (String key : new String[] {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                "v_head_dim"}) {
            json.remove(key);
        }
        assertThat(parse(json).latentAttention()).contains(new LatentAttention(1536, 512, 128, 64, 128));
    }

    @Test
    void writtenJsonReadsBackEqual() throws Exception {
        ModelConfig dense = parse(fixture("deepseek_v2_dense"));
        assertThat(parse(dense.toJson())).isEqualTo(dense);
        for (String sparse : new String[] {"deepseek_v2_lite", "deepseek_v2"}) {
            ModelConfig c = parse(fixture(sparse));
            assertThat(parse(c.toJson())).isEqualTo(c);
        }
        ModelConfig lowRank = dense.toBuilder().latentAttention(new LatentAttention(24, 32, 32, 16, 32)).build();
        assertThat(parse(lowRank.toJson())).isEqualTo(lowRank);
    }

    @Test
    void theFixturesHaveADenseFirstLayerThenRoutedAndSharedExperts() throws Exception {
        ModelConfig lite = parse(fixture("deepseek_v2_lite"));
        assertThat(lite.moe()).contains(new MoeConfig(8, 40, new MoeRouting(MoeRouting.Scoring.SOFTMAX, 2, false, 1, 1,
                1f), List.of(false, true, true), 40));
        assertThat(lite.latentAttention()).contains(new LatentAttention(0, 32, 32, 16, 32));
        ModelConfig full = parse(fixture("deepseek_v2"));
        assertThat(full.moe()).contains(new MoeConfig(8, 40, new MoeRouting(MoeRouting.Scoring.SOFTMAX, 2, false, 4, 2,
                2.5f), List.of(false, true, true), 40));
        assertThat(full.latentAttention()).contains(new LatentAttention(24, 32, 32, 16, 32));
        assertThat(parse(fixture("deepseek_v2_dense")).moe()).isEmpty();
    }

    @Test
    void liteExpertsReadFromItsPublishedLayout() throws IOException {
        MoeConfig moe = parse(lite()).moe().orElseThrow();
        assertThat(moe.numExperts()).isEqualTo(64);
        assertThat(moe.expertIntermediateSize()).isEqualTo(1408);
        assertThat(moe.sharedIntermediateSize()).isEqualTo(2 * 1408);
        assertThat(moe.routing()).isEqualTo(new MoeRouting(MoeRouting.Scoring.SOFTMAX, 6, false, 1, 1, 1f));
        assertThat(moe.sparseLayers()).hasSize(27).containsOnlyOnce(false).first().isEqualTo(false);
    }

    @Test
    void absentExpertKeysTakeTransformersDefaults() throws IOException {
        ObjectNode json = liteDense();
        for (String key : new String[] {"first_k_dense_replace", "n_routed_experts", "n_shared_experts",
                "moe_intermediate_size", "routed_scaling_factor", "topk_method", "n_group", "topk_group",
                "norm_topk_prob", "moe_layer_freq", "scoring_func"}) {
            json.remove(key);
        }
        MoeConfig moe = parse(json).moe().orElseThrow();
        assertThat(moe.sparseLayers()).hasSize(27).doesNotContain(false);
        assertThat(moe.numExperts()).isEqualTo(64);
        assertThat(moe.expertIntermediateSize()).isEqualTo(1407);
        assertThat(moe.sharedIntermediateSize()).isEqualTo(2 * 1407);
        assertThat(moe.routing()).isEqualTo(new MoeRouting(MoeRouting.Scoring.SOFTMAX, 6, false, 1, 1, 1f));
    }

    @Test
    void whatTheExpertsCannotRunIsRefusedByName() throws IOException {
        assertThatThrownBy(() -> parse(lite().put("moe_layer_freq", 2))).hasMessageContaining("moe_layer_freq 2");
        assertThatThrownBy(() -> parse(lite().put("scoring_func", "sigmoid")))
                .hasMessageContaining("scoring_func 'sigmoid'");
        assertThatThrownBy(() -> parse(lite().put("norm_topk_prob", true))).hasMessageContaining("norm_topk_prob=true");
        assertThatThrownBy(() -> parse(lite().putNull("n_shared_experts"))).hasMessageContaining("n_shared_experts null");
        assertThatThrownBy(() -> parse(lite().put("topk_method", "noaux_tc"))).hasMessageContaining("'noaux_tc'");
        ObjectNode noGroups = lite().put("topk_method", "group_limited_greedy");
        noGroups.remove("n_group");
        assertThatThrownBy(() -> parse(noGroups)).hasMessageContaining("'n_group'");
        assertThatThrownBy(() -> parse(lite().put("topk_method", "group_limited_greedy").put("n_group", 16)
                .put("topk_group", 1))).hasMessageContaining("at least top_k experts");
        ObjectNode noTopK = lite();
        noTopK.remove("num_experts_per_tok");
        assertThatThrownBy(() -> parse(noTopK)).hasMessageContaining("'num_experts_per_tok'");
    }

    @Test
    void expertsDeepseekV2CannotStateAreRefused() throws Exception {
        ModelConfig full = parse(fixture("deepseek_v2"));
        MoeConfig moe = full.moe().orElseThrow();
        for (MoeConfig bad : List.of(
                new MoeConfig(8, 40, moe.routing(), List.of(true, false, true), 40),
                new MoeConfig(8, 40, MoeRouting.softmaxTopK(2, true), moe.sparseLayers(), 40),
                new MoeConfig(8, 40, moe.routing(), moe.sparseLayers(), 60))) {
            assertThatThrownBy(() -> full.toBuilder().moe(bad).build()).hasMessageContaining("first_k_dense_replace");
        }
    }

    @Test
    void whatTheForwardDoesNotRunIsRefusedByName() throws IOException {
        ObjectNode yarn = liteDense();
        yarn.putObject("rope_scaling").put("type", "yarn").put("factor", 40.0).put("mscale", 0.707)
                .put("mscale_all_dim", 0.707).put("original_max_position_embeddings", 4096);
        assertThatThrownBy(() -> parse(yarn)).hasMessageContaining("'yarn' is not supported");
        assertThatThrownBy(() -> parse(liteDense().put("attention_bias", true))).hasMessageContaining("attention_bias");
        assertThatThrownBy(() -> parse(liteDense().put("hidden_act", "gelu"))).hasMessageContaining("hidden_act 'gelu'");
        assertThatThrownBy(() -> parse(liteDense().put("pretraining_tp", 2))).hasMessageContaining("pretraining_tp");
        assertThatThrownBy(() -> parse(liteDense().put("sliding_window", 4096)))
                .hasMessageContaining("key 'sliding_window' is not supported");
        assertThatThrownBy(() -> parse(liteDense().put("num_key_value_heads", 1)))
                .hasMessageContaining("num_key_value_heads (1) must equal num_attention_heads (16)");
        assertThatThrownBy(() -> parse(liteDense().put("head_dim", 128)))
                .hasMessageContaining("head_dim (128) must equal qk_rope_head_dim (64)");
        assertThatThrownBy(() -> parse(liteDense().put("qk_head_dim", 128))).hasMessageContaining("qk_head_dim 128");
        assertThatThrownBy(() -> parse(liteDense().put("qk_rope_head_dim", 63))).hasMessageContaining("even");
    }

    @Test
    void otherArchitecturesHaveNoLatentAttention() {
        var builder = ModelConfig.builder(Architecture.LLAMA).hiddenSize(64).intermediateSize(96).numLayers(2)
                .numHeads(4).maxPositionEmbeddings(128).vocabSize(100);
        assertThat(builder.build().latentAttention()).isEmpty();
        assertThatThrownBy(() -> builder.latentAttention(new LatentAttention(0, 32, 32, 16, 32)).build())
                .hasMessageContaining("LlamaForCausalLM has no latent attention");
    }
}
