package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.KVCacheDType;
import org.mstar.resources.SamplingReqConfig;

/**
 * Greedy generation of a tiny random Llama on the CPU with FP8 (E4M3) KV pages against the same engine with pages in
 * the model's dtype (fp32 here): the logits of every step whose history both runs share stay within a band of the
 * reference's own spread, and most greedy tokens agree. Measured (seed 3, eight prompts, 24 tokens each): printed as
 * one line, and in docs/guides/models.md.
 */
class Fp8KvCacheFidelityTest {
    private static final int STEPS = 24;

    @Test
    void fp8KvTracksTheModelDtypeWithinABand(@TempDir Path dir) throws IOException {
        try (CpuDevice cpu = new CpuDevice(2)) {
            LlamaModel model = RandomModels.load(RandomModels.llama(), 3, dir, cpu);
            Random rnd = new Random(3);
            Map<String, int[]> prompts = new HashMap<>();
            for (int i = 0; i < 8; i++) {
                prompts.put("r" + i, RandomModels.prompt(rnd, 5 + 7 * i));
            }
            Run reference = Run.of(model, prompts, KVCacheDType.AUTO);
            Run fp8 = Run.of(model, prompts, KVCacheDType.FP8_E4M3);

            int agreeing = 0;
            int tokens = 0;
            double worstBand = 0;
            int comparedSteps = 0;
            for (String rid : prompts.keySet()) {
                List<Integer> want = reference.tokens.get(rid);
                List<Integer> got = fp8.tokens.get(rid);
                assertThat(got).hasSize(STEPS);
                boolean shared = true;
                for (int i = 0; i < STEPS; i++) {
                    // step i's logits follow the same history while every earlier token agreed
                    if (shared) {
                        float[] a = reference.logits.get(rid).get(i);
                        float[] b = fp8.logits.get(rid).get(i);
                        worstBand = Math.max(worstBand, maxDiff(a, b) / spread(a));
                        comparedSteps++;
                    }
                    boolean same = want.get(i).equals(got.get(i));
                    agreeing += same ? 1 : 0;
                    tokens++;
                    shared &= same;
                }
            }
            double agreement = agreeing / (double) tokens;
            System.out.printf(Locale.ROOT, "FP8 KV vs fp32 KV: %d of %d greedy tokens agree (%.1f %%); logits of %d "
                    + "steps on a shared history within %.2e of the reference's spread%n", agreeing, tokens,
                    100 * agreement, comparedSteps, worstBand);
            assertThat(worstBand).isPositive().isLessThan(0.05);
            assertThat(agreement).isGreaterThanOrEqualTo(0.75);
        }
    }

    /** The largest |a - b|. */
    private static double maxDiff(float[] a, float[] b) {
        double d = 0;
        for (int i = 0; i < a.length; i++) {
            d = Math.max(d, Math.abs(a[i] - b[i]));
        }
        return d;
    }

    /** max - min of a row of logits. */
    private static double spread(float[] a) {
        double lo = Double.POSITIVE_INFINITY;
        double hi = Double.NEGATIVE_INFINITY;
        for (float f : a) {
            lo = Math.min(lo, f);
            hi = Math.max(hi, f);
        }
        return hi - lo;
    }

    /** Greedy tokens and every step's logits of each request, all requests batched in one engine. */
    private record Run(Map<String, List<Integer>> tokens, Map<String, List<float[]>> logits) {
        static Run of(LlamaModel model, Map<String, int[]> prompts, KVCacheDType dtype) {
            EngineOptions base = RandomModels.options(8, 64, 96, 4, 0);
            LlamaEngine engine = RandomModels.engine(model,
                    base.withKvCache(base.kvCache().toBuilder().cacheDType(dtype).build()));
            Map<String, List<float[]>> logits = new HashMap<>();
            engine.observeLogits((rid, index, row) ->
                    logits.computeIfAbsent(rid, k -> new ArrayList<>()).add(row.clone()));
            EngineDriver driver = new EngineDriver();
            prompts.forEach((rid, prompt) -> engine.submit(GenerationRequest.builder(rid).promptTokenIds(prompt)
                    .sampling(SamplingReqConfig.greedy()).maxTokens(STEPS).ignoreEos(true).build()));
            driver.drain(engine, 1000);
            engine.close();
            assertThat(driver.failures).isEmpty();
            return new Run(driver.tokens, logits);
        }
    }
}
