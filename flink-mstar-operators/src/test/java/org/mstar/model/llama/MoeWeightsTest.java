package org.mstar.model.llama;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.DType;
import org.mstar.device.MoeRouting;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.Architecture;
import org.mstar.model.LatentAttention;
import org.mstar.model.ModelConfig;
import org.mstar.model.MoeConfig;
import org.mstar.model.io.Checkpoint;
import org.mstar.model.io.SafetensorsWriter;

/**
 * Expert weights of OLMoE, Qwen3-MoE and DeepSeek-V2 checkpoints (its shared experts too): random weights written as published (one tensor per expert and
 * projection) load back bit for bit, and so do the same weights saved with the experts stacked as transformers 5
 * holds them ({@code mlp.experts.gate_up_proj [E, 2I, H]}, {@code mlp.experts.down_proj [E, H, I]}).
 */
class MoeWeightsTest {
    /** Qwen3-MoE with its middle layer dense (mlp_only_layers [1]): 6 experts of width 24, top 2. */
    private static final ModelConfig QWEN3_MOE = ModelConfig.builder(Architecture.QWEN3_MOE).hiddenSize(32)
            .intermediateSize(48).numLayers(3).numHeads(4).numKvHeads(2).headDim(16).maxPositionEmbeddings(64)
            .vocabSize(512).moe(new MoeConfig(6, 24, MoeRouting.softmaxTopK(2, true), List.of(true, false, true)))
            .build();
    /** OLMoE: every layer sparse, q/k norms over the whole projection. */
    private static final ModelConfig OLMOE = ModelConfig.builder(Architecture.OLMOE).hiddenSize(32).intermediateSize(20)
            .numLayers(2).numHeads(4).numKvHeads(2).maxPositionEmbeddings(64).vocabSize(512)
            .moe(new MoeConfig(4, 20, MoeRouting.softmaxTopK(2, false), List.of(true, true))).build();
    /** DeepSeek-V2: a dense first layer, then 8 experts of width 24 in 4 groups and 2 shared experts. */
    private static final ModelConfig DEEPSEEK_V2 = ModelConfig.builder(Architecture.DEEPSEEK_V2).hiddenSize(32)
            .intermediateSize(48).numLayers(3).numHeads(4).headDim(8).latentAttention(new LatentAttention(0, 16, 8, 8,
                    8)).maxPositionEmbeddings(64).vocabSize(512)
            .moe(new MoeConfig(8, 24, new MoeRouting(MoeRouting.Scoring.SOFTMAX, 2, false, 4, 2, 2.5f),
                    List.of(false, true, true), 2 * 24)).build();

    private final CpuDevice cpu = new CpuDevice(1);

    @TempDir
    Path dir;

    @AfterEach
    void closeDevice() {
        cpu.close();
    }

    @Test
    void publishedPerExpertTensorsLoadBackBitExact() throws IOException {
        for (ModelConfig config : List.of(QWEN3_MOE, OLMOE, DEEPSEEK_V2)) {
            Path folder = dir.resolve(config.architecture().modelType());
            try (LlamaWeights random = RandomWeights.create(config, cpu, DType.BF16, 5)) {
                CheckpointWriter.write(random, folder);
                try (LlamaWeights loaded = LlamaWeights.load(folder, cpu, DType.BF16);
                     Checkpoint checkpoint = Checkpoint.open(folder)) {
                    assertThat(loaded.config()).isEqualTo(config);
                    LlamaWeightsTest.assertSameWeights(loaded, random);
                    String lastLayer = "model.layers." + (config.numLayers() - 1) + ".";
                    assertThat(checkpoint.info(lastLayer + "mlp.experts.3.gate_proj.weight").shape())
                            .containsExactly(config.moe().orElseThrow().expertIntermediateSize(), 32);
                }
            }
        }
        try (Checkpoint qwen = Checkpoint.open(dir.resolve("qwen3_moe"))) {
            assertThat(qwen.contains("model.layers.1.mlp.gate_proj.weight")).as("the dense layer").isTrue();
            assertThat(qwen.contains("model.layers.1.mlp.gate.weight")).isFalse();
        }
        try (Checkpoint deepseek = Checkpoint.open(dir.resolve("deepseek_v2"))) {
            assertThat(deepseek.info("model.layers.0.mlp.gate_proj.weight").shape()).containsExactly(48, 32);
            assertThat(deepseek.info("model.layers.1.mlp.shared_experts.up_proj.weight").shape()).containsExactly(48, 32);
            assertThat(deepseek.info("model.layers.1.mlp.shared_experts.down_proj.weight").shape())
                    .containsExactly(32, 48);
            assertThat(deepseek.contains("model.layers.0.mlp.shared_experts.up_proj.weight")).isFalse();
        }
        try (Checkpoint olmoe = Checkpoint.open(dir.resolve("olmoe"))) {
            assertThat(olmoe.info("model.layers.0.self_attn.q_norm.weight").shape()).containsExactly(4 * 8);
            assertThat(olmoe.info("model.layers.0.self_attn.k_norm.weight").shape()).containsExactly(2 * 8);
        }
    }

    @Test
    void expertsStackedAsTransformers5HoldsThemLoadToTheSameWeights() throws IOException {
        try (LlamaWeights random = RandomWeights.create(QWEN3_MOE, cpu, DType.F32, 6)) {
            SafetensorsWriter tensors = new SafetensorsWriter();
            random.hfTensors(true).forEach(tensors::add);
            tensors.writeFile(dir.resolve(Checkpoint.SINGLE_FILE));
            new ObjectMapper().writeValue(dir.resolve(ModelConfig.FILE_NAME).toFile(),
                    QWEN3_MOE.toBuilder().dtype(DType.F32).build().toJson());
            try (Checkpoint checkpoint = Checkpoint.open(dir)) {
                assertThat(checkpoint.info("model.layers.2.mlp.experts.gate_up_proj").shape()).containsExactly(6, 48, 32);
                assertThat(checkpoint.contains("model.layers.2.mlp.experts.0.gate_proj.weight")).isFalse();
            }
            try (LlamaWeights loaded = LlamaWeights.load(dir, cpu, DType.F32)) {
                LlamaWeightsTest.assertSameWeights(loaded, random);
            }
        }
    }
}
