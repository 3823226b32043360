package org.mstar.model.llama;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.DType;
import org.mstar.device.HalfFloats;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.Architecture;
import org.mstar.model.Fp8Quantization;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelFormatException;

/** What an FP8 checkpoint's loader does with the dtypes, scales and configs that do not fit together. */
class Fp8CheckpointLoadTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Phi-3 stores q/k/v and gate/up fused, so those tensors carry one set of scales each. */
    private static final ModelConfig PHI3 = ModelConfig.builder(Architecture.PHI3).hiddenSize(48).intermediateSize(80)
            .numLayers(2).numHeads(4).numKvHeads(2).maxPositionEmbeddings(64).vocabSize(300).dtype(DType.F32).build();
    private static final String Q_PROJ = "model.layers.0.self_attn.qkv_proj.weight";

    private final CpuDevice cpu = new CpuDevice(1);

    @TempDir
    Path dir;

    @AfterEach
    void closeDevice() {
        cpu.close();
    }

    private void writeBlocks() throws IOException {
        write(Fp8Quantization.blocks(16, 32, List.of()));
    }

    private void write(Fp8Quantization q) throws IOException {
        CheckpointWriter.writeRandom(PHI3.toBuilder().quantization(q).build(), DType.F32, 5, dir);
    }

    private void editQuantization(Consumer<ObjectNode> edit) throws IOException {
        ObjectNode config = (ObjectNode) JSON.readTree(dir.resolve(ModelConfig.FILE_NAME).toFile());
        edit.accept(config);
        JSON.writeValue(dir.resolve(ModelConfig.FILE_NAME).toFile(), config);
    }

    @Test
    void fusedProjectionsLoadIntoBf16RoundedOnceFromTheirFp32Values() throws IOException {
        writeBlocks();
        try (LlamaWeights f32 = LlamaWeights.load(dir, cpu, DType.F32);
             LlamaWeights bf16 = LlamaWeights.load(dir, cpu, DType.BF16)) {
            float[] exact = cpu.toFloats(f32.hfTensors().get(Q_PROJ));
            float[] rounded = cpu.toFloats(bf16.hfTensors().get(Q_PROJ));
            for (int i = 0; i < exact.length; i++) {
                assertThat(rounded[i]).isEqualTo(HalfFloats.roundBf16(exact[i]));
            }
            // the random weights, quantised: close to N(0, 0.02²) draws but not equal to them
            try (LlamaWeights original = RandomWeights.create(PHI3, cpu, DType.F32, 5)) {
                float[] drawn = cpu.toFloats(original.hfTensors().get(Q_PROJ));
                assertThat(exact).isNotEqualTo(drawn);
                for (int i = 0; i < exact.length; i++) {
                    assertThat(Math.abs(exact[i] - drawn[i])).isLessThanOrEqualTo(Math.abs(drawn[i]) / 16 + 1e-4f);
                }
            }
        }
    }

    @Test
    void fp8WeightsWithoutAQuantizationConfigAreRefusedByName() throws IOException {
        writeBlocks();
        editQuantization(c -> c.remove("quantization_config"));
        assertThatThrownBy(() -> LlamaWeights.load(dir, cpu, DType.F32)).isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("has dtype F8_E4M3; FP8 weights load only through a quantization_config");
    }

    @Test
    void scalesOfAnotherLayoutAreRefusedNamingTheScaleTensor() throws IOException {
        writeBlocks();
        editQuantization(c -> ((ObjectNode) c.get("quantization_config")).putArray("weight_block_size").add(32).add(32));
        assertThatThrownBy(() -> LlamaWeights.load(dir, cpu, DType.F32))
                .hasMessageContaining("scale tensor " + Q_PROJ + "_scale_inv")
                .hasMessageContaining("has shape [6, 2], expected [3, 2]");
    }

    @Test
    void aWeightTheConfigQuantisesButTheCheckpointDoesNotIsRefused() throws IOException {
        write(Fp8Quantization.channels(List.of("lm_head")));
        editQuantization(c -> ((ObjectNode) c.get("quantization_config")).putArray("ignore"));
        assertThatThrownBy(() -> LlamaWeights.load(dir, cpu, DType.F32))
                .hasMessageContaining("tensor lm_head.weight")
                .hasMessageContaining("has dtype F32, but quantization_config quantises it: expected F8_E4M3");
    }
}
