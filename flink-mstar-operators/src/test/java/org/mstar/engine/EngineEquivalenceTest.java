package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.SamplingReqConfig;

/**
 * The engine's logits for every sampled token equal a dense, unbatched, unpaged reference forward of
 * the same checkpoint, while requests are batched together, split into prefill chunks, partly served
 * from the prefix cache, and preempted (recomputed, or offloaded and reloaded). The "graphs" cases run
 * decode steps padded to batch buckets through {@link DecodeGraphs} (on the CPU a replay re-runs the
 * recorded forward), so padding rows, static plan buffers and sink-page writes are checked too.
 */
class EngineEquivalenceTest {
    private static final double TOLERANCE = 1e-4;

    static Stream<Arguments> models() {
        return Stream.of(
                Arguments.of("llama", RandomModels.llama(), 0, false),
                Arguments.of("llama-offload", RandomModels.llama(), 64, false),
                Arguments.of("qwen2", RandomModels.qwen2(), 0, false),
                Arguments.of("mistral-window", RandomModels.mistral(), 0, false),
                Arguments.of("llama-graphs", RandomModels.llama(), 0, true),
                Arguments.of("llama-offload-graphs", RandomModels.llama(), 64, true),
                Arguments.of("mistral-window-graphs", RandomModels.mistral(), 0, true));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("models")
    void logitsMatchDenseReference(String name, ModelConfig config, int offloadPages, boolean graphs, @TempDir Path dir)
            throws Exception {
        try (CpuDevice cpu = new CpuDevice(2); LlamaModel model = RandomModels.load(config, 7, dir, cpu)) {
            DenseLlamaReference reference = new DenseLlamaReference(model.weights());
            // 4 rows, 16 tokens a step, pages of 4 tokens, 13 usable pages: prompts chunk and requests get preempted
            LlamaEngine engine = RandomModels.engine(model,
                    RandomModels.options(4, 16, 14, 4, offloadPages).withDecodeGraphs(graphs));
            Map<String, List<float[]>> logits = new HashMap<>();
            engine.observeLogits((rid, index, l) -> {
                List<float[]> list = logits.computeIfAbsent(rid, k -> new ArrayList<>());
                assertThat(index).isEqualTo(list.size());
                list.add(l);
            });
            Random rnd = new Random(11);
            int[] shared = RandomModels.prompt(rnd, 13);
            Map<String, int[]> prompts = new HashMap<>();
            for (int i = 0; i < 5; i++) {
                prompts.put("r" + i, i == 0 ? shared : RandomModels.prompt(rnd, 5 + 6 * i));
            }
            EngineDriver driver = new EngineDriver();
            prompts.forEach((rid, p) -> engine.submit(request(rid, p)));
            driver.drain(engine, 500);
            // later prompts extending r0's prompt hit the prefix cache
            for (int i = 0; i < 3; i++) {
                int[] p = concat(shared, RandomModels.prompt(rnd, 3 + i));
                prompts.put("s" + i, p);
                engine.submit(request("s" + i, p));
            }
            driver.drain(engine, 500);

            assertThat(driver.failures).isEmpty();
            assertThat(driver.finished).hasSize(prompts.size());
            EngineStats stats = engine.stats();
            assertThat(stats.prefixHitTokens()).as("prefix-cache hits").isPositive();
            assertThat(stats.preemptions()).as("preemptions").isPositive();
            assertThat(engine.decodeGraphReplays() > 0).as("decode steps replayed").isEqualTo(graphs);
            assertEveryTokenClose(prompts, driver, logits, reference::lastLogits);
            engine.close();
        }
    }

    static GenerationRequest request(String rid, int[] prompt) {
        return GenerationRequest.builder(rid).promptTokenIds(prompt).sampling(SamplingReqConfig.greedy()).maxTokens(6)
                .ignoreEos(true).build();
    }

    static int[] concat(int[] a, int[] b) {
        int[] out = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    /** Each request's logits at every token it generated against {@code reference}'s after the same context. */
    static void assertEveryTokenClose(Map<String, int[]> prompts, EngineDriver driver, Map<String, List<float[]>> logits,
                                      Function<int[], double[]> reference) {
        for (var e : prompts.entrySet()) {
            List<Integer> generated = driver.tokens.get(e.getKey());
            List<float[]> seen = logits.get(e.getKey());
            assertThat(seen).hasSize(generated.size());
            for (int i = 0; i < generated.size(); i++) {
                int[] context = concat(e.getValue(), generated.subList(0, i).stream().mapToInt(Integer::intValue).toArray());
                assertClose(seen.get(i), reference.apply(context), e.getKey() + " token " + i);
            }
        }
    }

    static void assertClose(float[] actual, double[] expected, String what) {
        double maxAbs = 0;
        double maxDiff = 0;
        for (int i = 0; i < expected.length; i++) {
            maxAbs = Math.max(maxAbs, Math.abs(expected[i]));
            maxDiff = Math.max(maxDiff, Math.abs(actual[i] - expected[i]));
        }
        assertThat(maxDiff / maxAbs).as(what + " relative error").isLessThanOrEqualTo(TOLERANCE);
    }
}
