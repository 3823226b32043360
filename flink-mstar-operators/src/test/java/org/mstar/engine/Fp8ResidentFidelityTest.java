package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.mstar.device.DType;
import org.mstar.device.Float8E4m3;
import org.mstar.device.Fp8Weight;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.Fp8Quantization;
import org.mstar.model.ModelConfig;
import org.mstar.model.WeightQuantization;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.llama.LoadProgress;

/**
 * FP8 weights kept on the device ({@link WeightQuantization#FP8}) serve as the same codes and scales dequantised at
 * load: on the CPU, which dequantises each weight as it reads it, the logits are equal bit for bit over 40 greedy
 * steps, each request alone and all batched, for every checkpoint layout; a bf16 checkpoint quantised at load
 * serves as a model of its own quantised weights dequantised; and the projections take one byte a weight plus
 * their scales.
 */
class Fp8ResidentFidelityTest {
    static Stream<Arguments> checkpoints() {
        return Stream.of(
                Arguments.of("llama, 128x128 blocks", RandomModels.llama(), Fp8Quantization.blocks(128, 128, List.of())),
                Arguments.of("llama, 16x32 blocks", RandomModels.llama(), Fp8Quantization.blocks(16, 32, List.of())),
                Arguments.of("llama, channels", RandomModels.llama(), Fp8Quantization.channels(List.of("lm_head"))),
                Arguments.of("llama, tensor, lm_head too", RandomModels.llama(), Fp8Quantization.perTensor(List.of())),
                Arguments.of("qwen2 with biases, channels", RandomModels.qwen2(),
                        Fp8Quantization.channels(List.of("o_proj"))));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("checkpoints")
    void fp8CheckpointServesAsDequantisedAtLoad(String name, ModelConfig config, Fp8Quantization q,
                                                @TempDir Path dir) throws IOException {
        CheckpointWriter.writeRandom(config.toBuilder().quantization(q).build(), DType.F32, 7, dir);
        try (CpuDevice cpu = new CpuDevice(2);
             LlamaModel resident = new LlamaModel(LlamaWeights.load(dir, cpu, DType.F32, WeightQuantization.FP8,
                     LoadProgress.NONE), DType.F32, "fp8 resident");
             LlamaModel dequantised = new LlamaModel(LlamaWeights.load(dir, cpu, DType.F32), DType.F32, "fp8")) {
            resident.weights().hfTensors().forEach((tensor, t) ->
                    assertThat(t instanceof Fp8Weight).as(tensor).isEqualTo(q.quantises(tensor)));
            assertServeAlike(resident, dequantised);
        }
    }

    @Test
    void bf16CheckpointQuantisedAtLoadServesAsItsDequantisedCopy(@TempDir Path dir) throws IOException {
        CheckpointWriter.writeRandom(RandomModels.llama(), DType.BF16, 11, dir);
        try (CpuDevice cpu = new CpuDevice(2);
             LlamaModel resident = new LlamaModel(LlamaWeights.load(dir, cpu, DType.F32, WeightQuantization.FP8,
                     LoadProgress.NONE), DType.F32, "quantised at load");
             LlamaModel copy = new LlamaModel(LlamaWeights.load(dir, cpu, DType.F32), DType.F32, "copy")) {
            Map<String, Tensor> copied = copy.weights().hfTensors();
            int projections = 0;
            for (Map.Entry<String, Tensor> e : resident.weights().hfTensors().entrySet()) {
                String tensor = e.getKey();
                assertThat(e.getValue() instanceof Fp8Weight).as(tensor).isEqualTo(tensor.endsWith("_proj.weight"));
                if (e.getValue() instanceof Fp8Weight f) {
                    assertThat(f.blockRows()).isEqualTo(1);
                    assertThat(f.blockCols()).isEqualTo(f.dim(1));
                    float[] original = cpu.toFloats(copied.get(tensor));
                    float[] values = dequantise(cpu, f);
                    for (int i = 0; i < values.length; i++) {
                        // one scale a row, its largest magnitude at ±448: within half an E4M3 step of the original
                        assertThat(Math.abs(values[i] - original[i])).as(tensor)
                                .isLessThanOrEqualTo(Math.abs(original[i]) / 16 + 1e-3f * rowMax(original, i, f));
                    }
                    cpu.copyFromHost(floats(values), copied.get(tensor));
                    projections++;
                }
            }
            assertThat(projections).isEqualTo(7 * RandomModels.llama().numLayers());
            assertServeAlike(resident, copy);
        }
    }

    @Test
    void projectionsTakeOneByteAWeightPlusTheirScales(@TempDir Path dir) throws IOException {
        CheckpointWriter.writeRandom(RandomModels.llama(), DType.BF16, 5, dir);
        try (CpuDevice cpu = new CpuDevice(1);
             LlamaWeights bf16 = LlamaWeights.load(dir, cpu, DType.BF16);
             LlamaWeights fp8 = LlamaWeights.load(dir, cpu, DType.BF16, WeightQuantization.FP8, LoadProgress.NONE)) {
            long codes = 0;
            long scales = 0;
            for (var layer : fp8.layers()) {
                for (Tensor t : List.of(layer.qkvWeight(), layer.oWeight(), layer.gateUpWeight(), layer.downWeight())) {
                    Fp8Weight f = (Fp8Weight) t;
                    assertThat(f.byteSize()).isEqualTo(f.numel() + 4 * f.dim(0));
                    codes += f.numel();
                    scales += 4 * f.dim(0);
                }
            }
            // every projection drops from two bytes a weight to one, and gains one fp32 scale a row
            assertThat(fp8.byteSize()).isEqualTo(bf16.byteSize() - codes + scales);
            assertThat(fp8.lmHead().dtype()).isEqualTo(DType.BF16);
        }
    }

    /** Equal greedy tokens and logits bit for bit, all requests batched and each alone. */
    private static void assertServeAlike(LlamaModel model, LlamaModel reference) {
        Random rnd = new Random(3);
        Map<String, int[]> prompts = Map.of("a", RandomModels.prompt(rnd, 9), "b", RandomModels.prompt(rnd, 17),
                "c", RandomModels.prompt(rnd, 4));
        assertThat(Fp8CheckpointFidelityTest.Run.of(model, prompts))
                .isEqualTo(Fp8CheckpointFidelityTest.Run.of(reference, prompts));
        for (var p : prompts.entrySet()) {
            Map<String, int[]> alone = Map.of(p.getKey(), p.getValue());
            assertThat(Fp8CheckpointFidelityTest.Run.of(model, alone)).as(p.getKey() + " alone")
                    .isEqualTo(Fp8CheckpointFidelityTest.Run.of(reference, alone));
        }
    }

    /** The weight's real values, code × scale of its grid block, computed here from the stored bytes. */
    private static float[] dequantise(CpuDevice cpu, Fp8Weight w) {
        int rows = (int) w.dim(0);
        int cols = (int) w.dim(1);
        ByteBuffer codes = ByteBuffer.allocate(rows * cols);
        cpu.copyToHost(w.codes(), codes);
        float[] scales = cpu.toFloats(w.scales());
        int scaleCols = (int) w.scales().dim(1);
        float[] v = new float[rows * cols];
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                v[r * cols + c] = Float8E4m3.decode(codes.get(r * cols + c))
                        * scales[r / w.blockRows() * scaleCols + c / w.blockCols()];
            }
        }
        return v;
    }

    private static float rowMax(float[] values, int index, Fp8Weight w) {
        int cols = (int) w.dim(1);
        int from = index / cols * cols;
        float max = 0;
        for (int c = 0; c < cols; c++) {
            max = Math.max(max, Math.abs(values[from + c]));
        }
        return max;
    }

    private static ByteBuffer floats(float[] values) {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(values);
        return b;
    }
}
