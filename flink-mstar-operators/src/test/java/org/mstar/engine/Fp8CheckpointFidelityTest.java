package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.mstar.device.DType;
import org.mstar.device.Float8E4m3;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.Fp8Quantization;
import org.mstar.model.ModelConfig;
import org.mstar.model.io.Checkpoint;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.llama.RandomWeights;
import org.mstar.resources.SamplingReqConfig;

/**
 * A model loaded from an FP8 checkpoint serves exactly as the same model loaded from an fp32 checkpoint of the
 * dequantised weights, which this test computes on its own from the stored codes and scales: equal weights, and
 * equal logits bit for bit over 40 greedy steps, each request alone and all batched.
 */
class Fp8CheckpointFidelityTest {
    private static final int STEPS = 40;

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
    void servesAsTheDequantisedFp32Checkpoint(String name, ModelConfig config, Fp8Quantization q, @TempDir Path dir)
            throws IOException {
        Path fp8 = dir.resolve("fp8");
        Path dequantised = dir.resolve("fp32");
        CheckpointWriter.writeRandom(config.toBuilder().quantization(q).build(), DType.F32, 7, fp8);
        writeDequantised(fp8, config, q, dequantised);

        try (CpuDevice cpu = new CpuDevice(2);
             LlamaModel fromFp8 = new LlamaModel(LlamaWeights.load(fp8, cpu, DType.F32), DType.F32, "fp8");
             LlamaModel fromFp32 = new LlamaModel(LlamaWeights.load(dequantised, cpu, DType.F32), DType.F32, "fp32")) {
            assertThat(fromFp8.config().quantization()).contains(q);
            fromFp32.weights().hfTensors().forEach((tensor, expected) ->
                    assertThat(cpu.toFloats(fromFp8.weights().hfTensors().get(tensor))).as(tensor)
                            .isEqualTo(cpu.toFloats(expected)));

            Random rnd = new Random(3);
            Map<String, int[]> prompts = Map.of("a", RandomModels.prompt(rnd, 9), "b", RandomModels.prompt(rnd, 17),
                    "c", RandomModels.prompt(rnd, 4));
            Run batched = Run.of(fromFp8, prompts);
            assertThat(batched.tokens.values()).allSatisfy(t -> assertThat(t).hasSize(STEPS));
            assertThat(Run.of(fromFp32, prompts)).isEqualTo(batched);
            for (var p : prompts.entrySet()) {
                Map<String, int[]> alone = Map.of(p.getKey(), p.getValue());
                assertThat(Run.of(fromFp8, alone)).as(p.getKey() + " alone").isEqualTo(Run.of(fromFp32, alone));
            }
        }
    }

    /** Greedy tokens and the raw bits of every step's logits, by request. */
    record Run(Map<String, List<Integer>> tokens, Map<String, List<List<Integer>>> logitBits) {
        static Run of(LlamaModel model, Map<String, int[]> prompts) {
            LlamaEngine engine = RandomModels.engine(model, RandomModels.options(4, 16, 64, 4, 0));
            Map<String, List<List<Integer>>> bits = new HashMap<>();
            engine.observeLogits((rid, index, logits) -> {
                List<Integer> raw = new ArrayList<>();
                for (float f : logits) {
                    raw.add(Float.floatToRawIntBits(f));
                }
                bits.computeIfAbsent(rid, k -> new ArrayList<>()).add(raw);
            });
            EngineDriver driver = new EngineDriver();
            prompts.forEach((rid, prompt) -> engine.submit(GenerationRequest.builder(rid).promptTokenIds(prompt)
                    .sampling(SamplingReqConfig.greedy()).maxTokens(STEPS).ignoreEos(true).build()));
            driver.drain(engine, 1000);
            engine.close();
            assertThat(driver.failures).isEmpty();
            return new Run(driver.tokens, bits);
        }
    }

    /** Writes {@code config}'s fp32 checkpoint whose weights are those of the FP8 one, each code times its scale. */
    private static void writeDequantised(Path fp8, ModelConfig config, Fp8Quantization q, Path out) throws IOException {
        try (CpuDevice cpu = new CpuDevice(1); Checkpoint checkpoint = Checkpoint.open(fp8);
             LlamaWeights weights = RandomWeights.create(config, cpu, DType.F32, 0)) {
            for (Map.Entry<String, Tensor> e : weights.hfTensors().entrySet()) {
                String tensor = e.getKey();
                if (!q.quantises(tensor)) {
                    checkpoint.copyTo(tensor, e.getValue());
                    continue;
                }
                assertThat(checkpoint.info(tensor).safetensorsDtype()).as(tensor).isEqualTo("F8_E4M3");
                int rows = (int) e.getValue().dim(0);
                int cols = (int) e.getValue().dim(1);
                ByteBuffer codes = checkpoint.bytes(tensor);
                FloatBuffer scales = checkpoint.bytes(q.scaleName(tensor)).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
                ByteBuffer values = ByteBuffer.allocate(rows * cols * 4).order(ByteOrder.LITTLE_ENDIAN);
                for (int r = 0; r < rows; r++) {
                    for (int c = 0; c < cols; c++) {
                        int scale = switch (q.layout()) {
                            case BLOCK -> r / q.blockRows() * ((cols + q.blockCols() - 1) / q.blockCols()) + c / q.blockCols();
                            case CHANNEL -> r;
                            case TENSOR -> 0;
                        };
                        values.putFloat(Float8E4m3.decode(codes.get(r * cols + c)) * scales.get(scale));
                    }
                }
                cpu.copyFromHost(values.flip(), e.getValue());
            }
            CheckpointWriter.write(weights, out);
        }
    }
}
