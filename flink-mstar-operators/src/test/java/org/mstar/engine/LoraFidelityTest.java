package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.lora.PeftAdapters;
import org.mstar.model.lora.PeftMerge;
import org.mstar.model.lora.RandomPeftAdapters;
import org.mstar.model.lora.RandomPeftAdapters.Spec;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.SamplingReqConfig;

/**
 * A request's logits under adapter X equal, within fp32 rounding, the logits of the base model with X merged into its
 * weights (PEFT's {@code W + scaling · B · A}), whatever it is batched with: rows of another adapter and of the base
 * model in the same steps, prompts cut into prefill chunks, decode steps, decode graphs (on the CPU a replay re-runs
 * the recorded forward, so the graph variant with adapter ops and its static slot buffer are exercised), and prompts
 * shared between adapters, which must not share KV pages though the same adapter's requests do.
 */
class LoraFidelityTest {
    /** Relative to the largest logit: the merged and unmerged products differ only in fp32 rounding. */
    private static final double TOLERANCE = 1e-5;
    private static final List<String> ALL_MODULES =
            List.of("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj");
    private static final Spec X = new Spec("x", 8, 16, false, ALL_MODULES);
    private static final Spec Y = new Spec("y", 4, 8, true, List.of("q_proj", "v_proj", "down_proj"));

    static Stream<Arguments> models() {
        return Stream.of(
                Arguments.of("llama", RandomModels.llama(), false),
                Arguments.of("llama-graphs", RandomModels.llama(), true),
                Arguments.of("qwen2 (qkv bias, tied embeddings)", RandomModels.qwen2(), false));
    }

    /** A request: its prompt and the adapter it names (null: the base model). */
    private record Ask(String id, int[] prompt, String adapter) {}

    @ParameterizedTest(name = "{0}")
    @MethodSource("models")
    void logitsUnderAnAdapterEqualTheMergedModelsAloneAndBatched(String name, ModelConfig config, boolean graphs,
                                                                @TempDir Path dir) throws Exception {
        Path adapters = writeAdapters(dir, config);
        Random rnd = new Random(3);
        int[] shared = RandomModels.prompt(rnd, 13);
        List<Ask> first = List.of(
                new Ask("x0", shared, "x"), new Ask("y0", shared, "y"), new Ask("b0", shared, null),
                new Ask("x1", RandomModels.prompt(rnd, 30), "x"), new Ask("y1", RandomModels.prompt(rnd, 5), "y"),
                new Ask("b1", RandomModels.prompt(rnd, 22), null));
        // the same prompt again, extended: a prefix hit for the same adapter only
        List<Ask> second = List.of(new Ask("x2", extended(shared, rnd, 3), "x"),
                new Ask("y2", extended(shared, rnd, 4), "y"), new Ask("b2", extended(shared, rnd, 2), null));
        // 4 rows, 16 tokens a step, pages of 4 tokens: prompts chunk, rows of all three kinds share steps
        EngineOptions options = RandomModels.options(4, 16, 64, 4, 0).withDecodeGraphs(graphs);

        try (CpuDevice cpu = new CpuDevice(2);
             LlamaModel model = RandomModels.load(config, 7, dir.resolve("base"), cpu)) {
            Served served;
            try (LlamaEngine engine = RandomModels.engine(model,
                    options.withAdapters(new AdapterOptions(adapters, 2)))) {
                served = serve(engine, List.of(first, second));
                assertThat(engine.decodeGraphReplays() > 0).as("decode steps replayed").isEqualTo(graphs);
                assertThat(engine.stats().adapterLoads()).as("each adapter loaded once").isEqualTo(2);
                assertThat(engine.stats().adapterEvictions()).isZero();
            }
            Map<String, List<float[]>> reference = new HashMap<>(reference(model, null, options, first, second));
            PeftAdapters registered = PeftAdapters.open(adapters, config);
            for (String adapter : List.of("x", "y")) {
                reference.putAll(mergedReference(dir, registered, cpu, adapter, options, first, second));
            }
            assertSameLogits(served, reference, concat(first, second));
            // the adapters matter: the same prompt under x, y and the base model gives three different logits
            assertDiffer(served.logits.get("x0").get(0), served.logits.get("b0").get(0));
            assertDiffer(served.logits.get("y0").get(0), served.logits.get("b0").get(0));
            assertDiffer(served.logits.get("x0").get(0), served.logits.get("y0").get(0));
            // x2, y2 and b2 each found their own kind's pages of the shared prompt (3 whole pages), and only those
            assertThat(served.cachedPromptTokens).containsEntry("x2", 12).containsEntry("y2", 12)
                    .containsEntry("b2", 12).containsEntry("x0", 0).containsEntry("y0", 0).containsEntry("b0", 0);
        }
    }

    /** With one slot, requests of two adapters take turns: the second waits, its adapter replaces the first's. */
    @Test
    void oneSlotServesTwoAdaptersInTurn(@TempDir Path dir) throws Exception {
        ModelConfig config = RandomModels.llama();
        Path adapters = writeAdapters(dir, config);
        Random rnd = new Random(5);
        List<Ask> asks = List.of(new Ask("x0", RandomModels.prompt(rnd, 9), "x"),
                new Ask("y0", RandomModels.prompt(rnd, 7), "y"), new Ask("x1", RandomModels.prompt(rnd, 6), "x"),
                new Ask("b0", RandomModels.prompt(rnd, 8), null));
        EngineOptions options = RandomModels.options(4, 64, 64, 4, 0);
        try (CpuDevice cpu = new CpuDevice(2);
             LlamaModel model = RandomModels.load(config, 7, dir.resolve("base"), cpu);
             LlamaEngine engine = RandomModels.engine(model, options.withAdapters(new AdapterOptions(adapters, 1)))) {
            Served served = serve(engine, List.of(asks));

            assertThat(served.finished).containsKeys("x0", "y0", "x1", "b0");
            // x0 and x1 share the slot, y0 waits for both to finish, b0 runs beside whoever holds it
            assertThat(served.firstTokenStep.get("y0")).isGreaterThan(served.lastTokenStep.get("x0"))
                    .isGreaterThan(served.lastTokenStep.get("x1"));
            assertThat(served.firstTokenStep.get("b0")).isLessThan(served.lastTokenStep.get("x0"));
            assertThat(engine.stats().adapterLoads()).isEqualTo(2);
            assertThat(engine.stats().adapterEvictions()).isEqualTo(1);
            PeftAdapters registered = PeftAdapters.open(adapters, config);
            Map<String, List<float[]>> reference =
                    new HashMap<>(mergedReference(dir, registered, cpu, "x", options, asks));
            reference.putAll(mergedReference(dir, registered, cpu, "y", options, asks));
            assertSameLogits(served, reference, asks.subList(0, 3));
        }
    }

    /**
     * A thousand adapters registered and 128 slots: requests spread over all of them each get their own adapter's
     * merged logits, every adapter is loaded once (its requests run while it is resident) and the slots are reused.
     */
    @Test
    void aThousandAdaptersServeThroughAHundredAndTwentyEightSlots(@TempDir Path dir) throws Exception {
        ModelConfig config = RandomModels.llama();
        Path adapters = dir.resolve("adapters");
        int count = 1000;
        int slots = 128;
        List<Ask> asks = new ArrayList<>();
        Random rnd = new Random(11);
        for (int i = 0; i < count; i++) {
            String name = "a" + i;
            RandomPeftAdapters.write(adapters, config, new Spec(name, 2, 4, false, List.of("q_proj", "down_proj")),
                    1000 + i);
            asks.add(new Ask("r" + i, RandomModels.prompt(rnd, 2 + rnd.nextInt(5)), name));
        }
        EngineOptions options = RandomModels.options(32, 64, 256, 4, 0);
        try (CpuDevice cpu = new CpuDevice(2);
             LlamaModel model = RandomModels.load(config, 7, dir.resolve("base"), cpu)) {
            Served served;
            try (LlamaEngine engine = RandomModels.engine(model,
                    options.withAdapters(new AdapterOptions(adapters, slots)))) {
                served = serve(engine, List.of(asks));
                assertThat(engine.stats().adapterLoads()).isEqualTo(count);
                assertThat(engine.stats().adapterEvictions()).isEqualTo(count - slots);
            }
            assertThat(served.finished).hasSize(count);
            PeftAdapters registered = PeftAdapters.open(adapters, config);
            Map<String, List<float[]>> reference = new HashMap<>();
            for (Ask ask : asks) {
                reference.putAll(mergedReference(dir, registered, cpu, ask.adapter(), options, List.of(ask)));
            }
            assertSameLogits(served, reference, asks);
        }
    }

    /**
     * A folder whose adapters target q, v and down only: steps with adapter rows run the qkv projection unfused and
     * keep the fused gate/up activation (no adapter changes gate or up), decode graphs included.
     */
    @Test
    void adaptersOfSomeModulesLeaveTheOthersFused(@TempDir Path dir) throws Exception {
        ModelConfig config = RandomModels.llama();
        Path adapters = dir.resolve("adapters");
        RandomPeftAdapters.write(adapters, config, Y, 22);
        Random rnd = new Random(9);
        List<Ask> asks = List.of(new Ask("y0", RandomModels.prompt(rnd, 21), "y"),
                new Ask("b0", RandomModels.prompt(rnd, 9), null), new Ask("y1", RandomModels.prompt(rnd, 4), "y"));
        EngineOptions options = RandomModels.options(4, 16, 64, 4, 0).withDecodeGraphs(true);
        try (CpuDevice cpu = new CpuDevice(2);
             LlamaModel model = RandomModels.load(config, 7, dir.resolve("base"), cpu)) {
            Served served;
            try (LlamaEngine engine = RandomModels.engine(model,
                    options.withAdapters(new AdapterOptions(adapters, 4)))) {
                served = serve(engine, List.of(asks));
            }
            Map<String, List<float[]>> reference = new HashMap<>(reference(model, null, options, asks));
            reference.putAll(mergedReference(dir, PeftAdapters.open(adapters, config), cpu, "y", options, asks));
            assertSameLogits(served, reference, asks);
        }
    }

    @Test
    void anUnknownAdapterIsTheClientsMistake(@TempDir Path dir) throws Exception {
        ModelConfig config = RandomModels.llama();
        Path adapters = writeAdapters(dir, config);
        try (CpuDevice cpu = new CpuDevice(1);
             LlamaModel model = RandomModels.load(config, 7, dir.resolve("base"), cpu)) {
            try (LlamaEngine engine = RandomModels.engine(model,
                    RandomModels.options(4, 64, 64, 4, 0).withAdapters(new AdapterOptions(adapters, 2)))) {
                assertThatThrownBy(() -> engine.submit(request("z0", new int[] {5, 6, 7}, "z")))
                        .isInstanceOf(RequestValidationException.class)
                        .hasMessage("adapter: unknown adapter 'z'; this engine serves x, y");
                assertThat(engine.hasWork()).isFalse();
                engine.submit(request("x0", new int[] {5, 6, 7}, "x"));
                EngineDriver driver = new EngineDriver();
                driver.drain(engine, 100);
                assertThat(driver.finished).containsKey("x0");
            }
            try (LlamaEngine plain = RandomModels.engine(model, RandomModels.options(4, 64, 64, 4, 0))) {
                assertThatThrownBy(() -> plain.submit(request("x9", new int[] {5}, "x")))
                        .isInstanceOf(RequestValidationException.class).hasMessageContaining("serves no adapters");
            }
        }
    }

    // ---------------------------------------------------------------- helpers

    private static Path writeAdapters(Path dir, ModelConfig config) throws IOException {
        Path adapters = dir.resolve("adapters");
        RandomPeftAdapters.write(adapters, config, X, 21);
        RandomPeftAdapters.write(adapters, config, Y, 22);
        return adapters;
    }

    /** What an engine gave each request: logits per token, cached prompt tokens, and the steps of its tokens. */
    private static final class Served {
        final Map<String, List<float[]>> logits = new HashMap<>();
        final Map<String, Integer> cachedPromptTokens = new HashMap<>();
        final Map<String, Integer> firstTokenStep = new HashMap<>();
        final Map<String, Integer> lastTokenStep = new HashMap<>();
        final Map<String, FinishedRequest> finished = new LinkedHashMap<>();
    }

    /** Submits each wave, drains it, then the next; the requests name their adapters. */
    private static Served serve(LlamaEngine engine, List<List<Ask>> waves) {
        Served served = new Served();
        engine.observeLogits((rid, index, l) -> served.logits.computeIfAbsent(rid, k -> new ArrayList<>()).add(l));
        int step = 0;
        for (List<Ask> wave : waves) {
            wave.forEach(a -> engine.submit(request(a.id(), a.prompt(), a.adapter())));
            while (engine.hasWork()) {
                assertThat(++step).as("steps").isLessThan(2000);
                StepResult r = engine.step();
                assertThat(r.failures()).isEmpty();
                for (TokenOutput t : r.tokens()) {
                    served.firstTokenStep.putIfAbsent(t.requestId(), step);
                    served.lastTokenStep.put(t.requestId(), step);
                }
                for (FinishedRequest f : r.finished()) {
                    served.finished.put(f.requestId(), f);
                    served.cachedPromptTokens.put(f.requestId(), f.cachedPromptTokens());
                }
            }
        }
        return served;
    }

    /** The logits of the asks naming {@code adapter} (null: the base model's), served by {@code model} without one. */
    @SafeVarargs
    private static Map<String, List<float[]>> reference(LlamaModel model, String adapter, EngineOptions options,
                                                        List<Ask>... waves) {
        List<List<Ask>> own = new ArrayList<>();
        for (List<Ask> wave : waves) {
            own.add(wave.stream().filter(a -> Objects.equals(a.adapter(), adapter))
                    .map(a -> new Ask(a.id(), a.prompt(), null)).toList());
        }
        try (LlamaEngine engine = RandomModels.engine(model, options)) {
            return serve(engine, own).logits;
        }
    }

    /**
     * The logits of the asks naming {@code adapter}, served without adapters by the base model in {@code dir/base}
     * with that adapter of {@code adapters} merged into its weights.
     */
    @SafeVarargs
    private static Map<String, List<float[]>> mergedReference(Path dir, PeftAdapters adapters, CpuDevice cpu,
                                                              String adapter, EngineOptions options,
                                                              List<Ask>... waves) throws IOException {
        try (LlamaWeights merged = LlamaWeights.load(dir.resolve("base"), cpu, DType.F32)) {
            PeftMerge.merge(merged, adapters.load(adapter));
            return reference(new LlamaModel(merged, DType.F32, "merged:" + adapter), adapter, options, waves);
        }
    }

    /** Every ask's tokens' logits as served equal the reference's, as many tokens and each within the tolerance. */
    private static void assertSameLogits(Served served, Map<String, List<float[]>> reference, List<Ask> asks) {
        for (Ask ask : asks) {
            List<float[]> got = served.logits.get(ask.id());
            List<float[]> want = reference.get(ask.id());
            assertThat(got).as(ask.id() + " tokens").hasSize(want.size());
            for (int i = 0; i < want.size(); i++) {
                assertClose(got.get(i), want.get(i), ask.id() + " token " + i);
            }
        }
    }

    private static GenerationRequest request(String rid, int[] prompt, String adapter) {
        return GenerationRequest.builder(rid).promptTokenIds(prompt).sampling(SamplingReqConfig.greedy()).maxTokens(6)
                .ignoreEos(true).adapter(adapter).build();
    }

    private static void assertClose(float[] actual, float[] expected, String what) {
        double maxAbs = 0;
        double maxDiff = 0;
        for (int i = 0; i < expected.length; i++) {
            maxAbs = Math.max(maxAbs, Math.abs(expected[i]));
            maxDiff = Math.max(maxDiff, Math.abs(actual[i] - expected[i]));
        }
        assertThat(maxDiff / maxAbs).as(what + " relative error").isLessThanOrEqualTo(TOLERANCE);
    }

    private static void assertDiffer(float[] a, float[] b) {
        double maxAbs = 0;
        double maxDiff = 0;
        for (int i = 0; i < a.length; i++) {
            maxAbs = Math.max(maxAbs, Math.abs(b[i]));
            maxDiff = Math.max(maxDiff, Math.abs(a[i] - b[i]));
        }
        assertThat(maxDiff / maxAbs).as("relative difference").isGreaterThan(1e-2);
    }

    private static int[] extended(int[] prompt, Random rnd, int more) {
        return EngineEquivalenceTest.concat(prompt, RandomModels.prompt(rnd, more));
    }

    private static <T> List<T> concat(List<T> a, List<T> b) {
        List<T> out = new ArrayList<>(a);
        out.addAll(b);
        return out;
    }
}
