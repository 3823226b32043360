package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.DType;
import org.mstar.device.Fp8Weight;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.Fp8Quantization;
import org.mstar.model.WeightQuantization;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.llama.LoadProgress;

/**
 * W8A8 on the CPU ({@link WeightQuantization#FP8_W8A8}): every FP8 projection quantises its input rows per token; a
 * request's logits do not depend on the requests batched with it (each row has its own scale), bit for bit; and the
 * logits stay near those of the same FP8 weights with unquantised activations, yet differ from them.
 */
class Fp8W8a8EngineTest {
    @Test
    void w8a8ServesEachRequestAsAloneAndNearWeightOnly(@TempDir Path dir) throws IOException {
        CheckpointWriter.writeRandom(RandomModels.llama().toBuilder()
                .quantization(Fp8Quantization.channels(List.of())).build(), DType.F32, 13, dir);
        try (CpuDevice cpu = new CpuDevice(2);
             LlamaModel w8a8 = new LlamaModel(LlamaWeights.load(dir, cpu, DType.BF16, WeightQuantization.FP8_W8A8,
                     LoadProgress.NONE), DType.BF16, "w8a8");
             LlamaModel weightOnly = new LlamaModel(LlamaWeights.load(dir, cpu, DType.BF16, WeightQuantization.FP8,
                     LoadProgress.NONE), DType.BF16, "fp8")) {
            w8a8.weights().hfTensors().forEach((tensor, t) -> {
                if (tensor.endsWith("_proj.weight")) {
                    assertThat(t).as(tensor).isInstanceOfSatisfying(Fp8Weight.class,
                            f -> assertThat(f.quantisesActivations()).isTrue());
                }
            });
            Random rnd = new Random(3);
            Map<String, int[]> prompts = Map.of("a", RandomModels.prompt(rnd, 9), "b", RandomModels.prompt(rnd, 17),
                    "c", RandomModels.prompt(rnd, 4));
            Fp8CheckpointFidelityTest.Run all = Fp8CheckpointFidelityTest.Run.of(w8a8, prompts);
            for (var p : prompts.entrySet()) {
                Fp8CheckpointFidelityTest.Run alone = Fp8CheckpointFidelityTest.Run.of(w8a8, Map.of(p.getKey(),
                        p.getValue()));
                assertThat(alone.tokens().get(p.getKey())).as(p.getKey()).isEqualTo(all.tokens().get(p.getKey()));
                assertThat(alone.logitBits().get(p.getKey())).as(p.getKey())
                        .isEqualTo(all.logitBits().get(p.getKey()));
            }
            Fp8CheckpointFidelityTest.Run reference = Fp8CheckpointFidelityTest.Run.of(weightOnly, prompts);
            for (String rid : prompts.keySet()) {
                // the first step's logits follow the same prompt in both: within the activations' quantisation error
                float[] actual = floats(all.logitBits().get(rid).get(0));
                float[] expected = floats(reference.logitBits().get(rid).get(0));
                double ss = 0;
                double diff = 0;
                for (int i = 0; i < expected.length; i++) {
                    ss += (double) expected[i] * expected[i];
                    diff = Math.max(diff, Math.abs(actual[i] - expected[i]));
                }
                double rms = Math.sqrt(ss / expected.length);
                assertThat(diff).as(rid).isGreaterThan(0).isLessThan(0.25 * rms);
            }
        }
    }

    private static float[] floats(List<Integer> bits) {
        float[] f = new float[bits.size()];
        for (int i = 0; i < f.length; i++) {
            f[i] = Float.intBitsToFloat(bits.get(i));
        }
        return f;
    }
}
