package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
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
import org.mstar.device.DeviceGroup;
import org.mstar.device.KernelOptions;
import org.mstar.device.MoeRouting;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.MoeConfig;
import org.mstar.model.WeightQuantization;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.model.llama.LoadProgress;

/**
 * A model split over N CPU devices (tensor parallelism; expert parallelism for the routed experts) generates the
 * same greedy tokens as on one device, with logits within 1e-5 (the ranks' partial sums are added in another order
 * than one device's dot products), while requests are batched, prefills chunked, prefixes cached and requests
 * preempted. The vocabulary of the Llama here does not divide by 4, so the last rank's LM head is a row short.
 */
class TensorParallelEquivalenceTest {
    private static final double TOLERANCE = 1e-5;

    /** 8 query and 4 key-value heads, so that 2 and 4 devices divide them; a vocabulary of 322. */
    static ModelConfig llama() {
        return ModelConfig.builder(Architecture.LLAMA)
                .hiddenSize(64).intermediateSize(128).numLayers(2).numHeads(8).numKvHeads(4).headDim(8)
                .ropeTheta(10_000).maxPositionEmbeddings(512).vocabSize(322).bosTokenId(0).eosTokenId(1)
                .dtype(DType.F32).build();
    }

    /** Qwen3-MoE: per-head q/k norms, 6 experts of width 24, top 2, its middle layer dense. */
    static ModelConfig qwen3Moe() {
        return ModelConfig.builder(Architecture.QWEN3_MOE).hiddenSize(32).intermediateSize(48).numLayers(3)
                .numHeads(4).numKvHeads(2).headDim(16).maxPositionEmbeddings(512).vocabSize(RandomModels.VOCAB)
                .bosTokenId(0).eosTokenId(1).dtype(DType.F32)
                .moe(new MoeConfig(6, 24, MoeRouting.softmaxTopK(2, true), List.of(true, false, true))).build();
    }

    static Stream<Arguments> splits() {
        return Stream.of(
                Arguments.of("llama-tp2", llama(), 2),
                Arguments.of("llama-tp4", llama(), 4),
                Arguments.of("qwen2-bias-tied-tp2", RandomModels.qwen2(), 2),
                Arguments.of("qwen3-moe-ep2", qwen3Moe(), 2));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("splits")
    void splitModelGeneratesAsOneDevice(String name, ModelConfig config, int degree, @TempDir Path dir)
            throws Exception {
        CheckpointWriter.writeRandom(config, DType.F32, 7, dir);
        Run one;
        try (CpuDevice cpu = new CpuDevice(2)) {
            one = run(LlamaEngineLoader.load(dir, cpu, options()));
        }
        Run split;
        try (DeviceGroup group = DeviceGroup.open("cpu", degree, KernelOptions.defaults())) {
            split = run(LlamaEngineLoader.load(dir, group, options(), WeightQuantization.NONE, LoadProgress.NONE));
        }
        assertThat(split.tokens).isEqualTo(one.tokens);
        for (var e : one.logits.entrySet()) {
            List<float[]> mine = split.logits.get(e.getKey());
            assertThat(mine).hasSameSizeAs(e.getValue());
            for (int i = 0; i < mine.size(); i++) {
                float[] a = mine.get(i);
                float[] b = e.getValue().get(i);
                double maxDiff = 0;
                for (int v = 0; v < b.length; v++) {
                    maxDiff = Math.max(maxDiff, Math.abs(a[v] - b[v]));
                }
                assertThat(maxDiff).as(e.getKey() + " token " + i).isLessThanOrEqualTo(TOLERANCE);
            }
        }
        assertThat(split.stats.prefixHitTokens()).as("prefix-cache hits").isPositive();
        assertThat(split.stats.preemptions()).as("preemptions").isPositive();
    }

    @Test
    void refusesADegreeThatDoesNotDivideTheKeyValueHeads(@TempDir Path dir) throws Exception {
        CheckpointWriter.writeRandom(RandomModels.llama(), DType.F32, 7, dir);
        try (DeviceGroup group = DeviceGroup.open("cpu", 4, KernelOptions.defaults())) {
            assertThatThrownBy(() -> LlamaEngineLoader.load(dir, group, options(), WeightQuantization.NONE,
                    LoadProgress.NONE))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("tensor parallel 4 does not divide the 2 key-value heads (num_key_value_heads) of "
                            + "LlamaForCausalLM");
        }
    }

    @Test
    void refusesDecodeGraphs(@TempDir Path dir) throws Exception {
        CheckpointWriter.writeRandom(llama(), DType.F32, 7, dir);
        try (DeviceGroup group = DeviceGroup.open("cpu", 2, KernelOptions.defaults())) {
            assertThatThrownBy(() -> LlamaEngineLoader.load(dir, group, options().withDecodeGraphs(true),
                    WeightQuantization.NONE, LoadProgress.NONE))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("tensor parallel 2 does not run with decode graphs");
        }
    }

    /** 4 rows, 16 tokens a step, pages of 4 tokens, 13 usable pages: prompts chunk and requests get preempted. */
    private static EngineOptions options() {
        return RandomModels.options(4, 16, 14, 4, 0);
    }

    private record Run(Map<String, List<Integer>> tokens, Map<String, List<float[]>> logits, EngineStats stats) {}

    private static Run run(LlamaEngine engine) {
        try (engine) {
            Map<String, List<float[]>> logits = new HashMap<>();
            engine.observeLogits((rid, index, l) -> logits.computeIfAbsent(rid, k -> new ArrayList<>()).add(l));
            Random rnd = new Random(11);
            int[] shared = RandomModels.prompt(rnd, 13);
            EngineDriver driver = new EngineDriver();
            engine.submit(EngineEquivalenceTest.request("r0", shared));
            driver.drain(engine, 500);
            // prompts extending r0's hit the prefix cache; with the others they preempt requests
            for (int i = 0; i < 3; i++) {
                engine.submit(EngineEquivalenceTest.request("s" + i,
                        EngineEquivalenceTest.concat(shared, RandomModels.prompt(rnd, 3 + i))));
            }
            for (int i = 1; i < 5; i++) {
                engine.submit(EngineEquivalenceTest.request("r" + i, RandomModels.prompt(rnd, 5 + 6 * i)));
            }
            driver.drain(engine, 500);
            assertThat(driver.failures).isEmpty();
            assertThat(driver.finished).hasSize(8);
            return new Run(driver.tokens, logits, engine.stats());
        }
    }
}
