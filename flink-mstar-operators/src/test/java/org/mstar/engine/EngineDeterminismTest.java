package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.SamplingReqConfig;

/**
 * A request's sampled tokens (temperature > 0, fixed seed) depend on nothing but the request: not on
 * the batch it shares, not on preemption, not on being resumed after its engine was lost.
 */
class EngineDeterminismTest {
    @TempDir
    static Path dir;
    static CpuDevice cpu;
    static LlamaModel model;

    @BeforeAll
    static void load() throws Exception {
        cpu = new CpuDevice(2);
        model = RandomModels.load(RandomModels.llama(), 3, dir, cpu);
    }

    @AfterAll
    static void close() {
        model.close();
        cpu.close();
    }

    private static GenerationRequest sampled(String rid, int[] prompt, long seed) {
        SamplingReqConfig s = SamplingReqConfig.DEFAULTS.withTemperature(0.9).withSeed(seed);
        return GenerationRequest.builder(rid).promptTokenIds(prompt).sampling(s).maxTokens(12).ignoreEos(true).build();
    }

    private static Map<String, List<Integer>> run(EngineOptions options, List<GenerationRequest> requests) {
        try (LlamaEngine engine = RandomModels.engine(model, options)) {
            EngineDriver d = new EngineDriver();
            requests.forEach(engine::submit);
            d.drain(engine, 2_000);
            assertThat(d.failures).isEmpty();
            return d.tokens;
        }
    }

    @Test
    void tokensIdenticalAloneInABatchOf16AndAfterPreemption() {
        Random rnd = new Random(5);
        int[] prompt = RandomModels.prompt(rnd, 21);
        GenerationRequest target = sampled("target", prompt, 1234);
        List<Integer> alone = run(RandomModels.options(16, 64, 200, 4, 0), List.of(target)).get("target");
        assertThat(alone).hasSize(12);

        List<GenerationRequest> batch = new java.util.ArrayList<>();
        for (int i = 0; i < 15; i++) {
            batch.add(sampled("other" + i, RandomModels.prompt(rnd, 5 + i), i));
        }
        batch.add(7, target);
        assertThat(run(RandomModels.options(16, 64, 200, 4, 0), batch).get("target")).isEqualTo(alone);

        // 40 usable pages for ~100 needed: requests are freed and recomputed along the way
        LlamaEngine pressured = RandomModels.engine(model, RandomModels.options(16, 64, 41, 4, 0));
        EngineDriver d = new EngineDriver();
        batch.forEach(pressured::submit);
        d.drain(pressured, 5_000);
        assertThat(pressured.stats().preemptions()).isPositive();
        assertThat(d.tokens.get("target")).isEqualTo(alone);
        pressured.close();
    }

    @Test
    void resumedRequestContinuesTheSameStream() {
        int[] prompt = RandomModels.prompt(new Random(9), 17);
        GenerationRequest target = sampled("r", prompt, 77);
        List<Integer> full = run(RandomModels.options(4, 32, 100, 4, 0), List.of(target)).get("r");
        int[] firstFive = full.subList(0, 5).stream().mapToInt(Integer::intValue).toArray();
        try (LlamaEngine engine = RandomModels.engine(model, RandomModels.options(4, 32, 100, 4, 0))) {
            engine.resume(target, firstFive);
            EngineDriver d = new EngineDriver();
            d.drain(engine, 100);
            assertThat(d.finished.get("r").tokenIds()).containsExactly(full.stream().mapToInt(Integer::intValue).toArray());
        }
    }
}
