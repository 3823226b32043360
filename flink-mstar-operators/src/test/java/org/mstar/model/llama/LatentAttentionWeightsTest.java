package org.mstar.model.llama;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.LatentAttention;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelCost;
import org.mstar.model.io.SafetensorsFile;

/**
 * DeepSeek-V2's weights under the names and shapes transformers saves (the fixtures', experts included, and the
 * low-rank query's tensors), and the projection bytes {@link ModelCost} counts for it.
 */
class LatentAttentionWeightsTest {

    private static Path fixture(String name) throws Exception {
        return Path.of(LatentAttentionWeightsTest.class.getResource("/org/mstar/model/fixtures/" + name).toURI());
    }

    private static Map<String, String> shapes(Map<String, Tensor> tensors) {
        return tensors.entrySet().stream().collect(Collectors.toMap(Map.Entry::getKey,
                e -> Arrays.toString(e.getValue().shape())));
    }

    /** Every layer dense, and a dense first layer before the router, a shared expert and 8 routed ones per expert. */
    @ParameterizedTest
    @ValueSource(strings = {"deepseek_v2_dense", "deepseek_v2_lite", "deepseek_v2"})
    void eachFixtureLoadsEveryTensorItStores(String fixture) throws Exception {
        try (CpuDevice cpu = new CpuDevice(1);
             LlamaWeights w = LlamaWeights.load(fixture(fixture), cpu, DType.F32);
             SafetensorsFile f = SafetensorsFile.open(fixture(fixture).resolve("model.safetensors"))) {
            Map<String, String> ours = shapes(w.hfTensors());
            assertThat(ours.keySet()).containsExactlyInAnyOrderElementsOf(f.names());
            for (String name : f.names()) {
                assertThat(ours.get(name)).as(name).isEqualTo(Arrays.toString(f.info(name).shape()));
            }
        }
    }

    @Test
    void aLowRankQueryHasItsBottleneckTensors() throws Exception {
        ModelConfig c = ModelConfig.load(fixture("deepseek_v2_dense")).toBuilder()
                .latentAttention(new LatentAttention(24, 32, 32, 16, 32)).build();
        try (CpuDevice cpu = new CpuDevice(1); LlamaWeights w = RandomWeights.create(c, cpu, DType.BF16, 3)) {
            Map<String, String> ours = shapes(w.hfTensors());
            String p = "model.layers.1.self_attn.";
            assertThat(ours).doesNotContainKey(p + "q_proj.weight")
                    .containsEntry(p + "q_a_proj.weight", "[24, 64]")
                    .containsEntry(p + "q_a_layernorm.weight", "[24]")
                    .containsEntry(p + "q_b_proj.weight", "[" + 4 * 48 + ", 24]")
                    .containsEntry(p + "kv_a_proj_with_mqa.weight", "[48, 64]")
                    .containsEntry(p + "kv_b_proj.weight", "[" + 4 * 64 + ", 32]")
                    .containsEntry(p + "o_proj.weight", "[64, " + 4 * 32 + "]");
            long projections = w.hfTensors().entrySet().stream()
                    .filter(e -> !LlamaWeights.isNorm(e.getKey()) && !e.getKey().equals("model.embed_tokens.weight"))
                    .mapToLong(e -> e.getValue().byteSize()).sum();
            assertThat(ModelCost.weightBytes(c)).isEqualTo((double) projections);
        }
    }
}
