package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.mamba.StateSnapshots;
import org.mstar.resources.SamplingReqConfig;

/**
 * Prefix caching of Mamba2 and Bamba on the CPU (fp32): requests sharing prefixes shorter than the snapshot interval,
 * exactly one interval, several, and several with odd tails, first alone and then batched at an odd token budget
 * (prompts in chunks), give the same greedy tokens as with the cache off and logits within fp32 rounding of a scan
 * chunked elsewhere; those that share at least an interval start from a snapshot. A shared 512-token system prompt
 * over 1,000 requests is served from the cache for at least 90 % of the prompt tokens.
 */
class RecurrentPrefixCacheTest {
    /** Scans of the same tokens chunked at other points agree to fp32 rounding (under 1e-5 here). */
    private static final float TOLERANCE = 2e-5f;
    private static final int INTERVAL = 16;
    private static CpuDevice cpu;

    @BeforeAll
    static void start() {
        cpu = new CpuDevice(2);
    }

    @AfterAll
    static void stop() {
        cpu.close();
    }

    /** One engine's run: each request's greedy tokens and logits, and its finished record. */
    private record Run(EngineDriver driver, Map<String, Map<Integer, float[]>> logits, EngineStats stats) {}

    /** A base prompt and requests sharing its first 5, 16, 48, 53 and 100 tokens (twice each), with own tails. */
    private static List<int[]> prompts() {
        Random random = new Random(17);
        int[] base = random.ints(120, 3, 384).toArray();
        List<int[]> prompts = new ArrayList<>();
        for (int shared : new int[] {5, 16, 48, 53, 100, 100, 53, 48, 16, 5}) {
            int tail = 1 + random.nextInt(13);
            int[] p = Arrays.copyOf(base, shared + tail);
            for (int t = shared; t < p.length; t++) {
                p[t] = 3 + random.nextInt(381);
            }
            prompts.add(p);
        }
        // the base itself, ending exactly at a snapshot point (its last interval's state is taken by no one)
        prompts.add(Arrays.copyOf(base, 112));
        return prompts;
    }

    /** The first four prompts one after another, then the rest together, at 7 tokens a step. */
    private static Run run(String arch, boolean prefixCache, List<int[]> prompts) throws Exception {
        KvCacheOptions kv = KvCacheOptions.builder().maxSeqLen(512).pageSize(4).maxNumPages(512)
                .prefixCache(prefixCache).build();
        try (HybridEngine engine = HybridEngineLoader.load(TransformersFidelityTest.folder(arch), cpu,
                new EngineOptions(16, 7, kv), new StateSnapshots(INTERVAL, 8))) {
            Map<String, Map<Integer, float[]>> logits = new HashMap<>();
            engine.observeLogits((rid, index, l) -> logits.computeIfAbsent(rid, k -> new HashMap<>())
                    .put(index, l.clone()));
            EngineDriver driver = new EngineDriver();
            for (int i = 0; i < prompts.size(); i++) {
                engine.submit(GenerationRequest.builder("r" + i).promptTokenIds(prompts.get(i))
                        .sampling(SamplingReqConfig.greedy()).maxTokens(12).ignoreEos(true).build());
                if (i < 4) {
                    driver.drain(engine, 10_000);
                }
            }
            driver.drain(engine, 10_000);
            assertThat(driver.failures).isEmpty();
            return new Run(driver, logits, engine.stats());
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"mamba2", "bamba"})
    void cachedPrefixesGiveTheOutputsOfCachingOff(String arch) throws Exception {
        List<int[]> prompts = prompts();
        Run off = run(arch, false, prompts);
        Run on = run(arch, true, prompts);
        float worst = 0;
        for (int i = 0; i < prompts.size(); i++) {
            String rid = "r" + i;
            assertThat(on.driver().tokens.get(rid)).as("%s request %d tokens", arch, i)
                    .isEqualTo(off.driver().tokens.get(rid));
            for (Map.Entry<Integer, float[]> e : off.logits().get(rid).entrySet()) {
                float[] got = on.logits().get(rid).get(e.getKey());
                for (int v = 0; v < got.length; v++) {
                    worst = Math.max(worst, Math.abs(got[v] - e.getValue()[v]));
                }
            }
            int cached = on.driver().finished.get(rid).cachedPromptTokens();
            assertThat(cached % INTERVAL).as("a cached prefix ends at a snapshot point").isZero();
            assertThat(off.driver().finished.get(rid).cachedPromptTokens()).isZero();
        }
        assertThat(worst).as("%s largest |logit difference|", arch).isLessThanOrEqualTo(TOLERANCE);
        // alone: the 16 shared tokens of the first (5 shared) and second (16 shared) are no snapshot of the base
        // prefix, the third (48 shared) finds the second's at 16 and leaves 32 and 48, which the fourth takes;
        // together, the rest find 48 at most (the fourth's 64 holds its own tail), the two sharing 16 and 5 less
        int[] expected = {0, 0, 16, 48, 48, 48, 48, 48, 16, 0, 48};
        for (int i = 0; i < expected.length; i++) {
            assertThat(on.driver().finished.get("r" + i).cachedPromptTokens()).as("%s request %d", arch, i)
                    .isEqualTo(expected[i]);
        }
        assertThat(on.stats().prefixHitTokens()).isPositive();
        System.out.printf("%s: prefix-cached prompt tokens %d of %d, largest |logit difference| %.3g%n", arch,
                on.stats().prefixHitTokens(), on.stats().promptTokens(), worst);
    }

    /** The Bamba fixture (random weights) with room for 1,024 positions; otherwise the defaults: pages of 16. */
    @Test
    void aSharedSystemPromptIsServedFromTheCache(@TempDir Path dir) throws Exception {
        Path fixture = TransformersFidelityTest.folder("bamba");
        for (String file : new String[] {"model.safetensors", "generation_config.json"}) {
            Files.copy(fixture.resolve(file), dir.resolve(file));
        }
        Files.writeString(dir.resolve("config.json"), Files.readString(fixture.resolve("config.json"))
                .replace("\"max_position_embeddings\": 512", "\"max_position_embeddings\": 1024"));
        Random random = new Random(5);
        int[] system = random.ints(512, 3, 384).toArray();
        KvCacheOptions kv = KvCacheOptions.builder().maxSeqLen(1024).maxNumPages(2048).build();
        try (HybridEngine engine = HybridEngineLoader.load(dir, cpu, new EngineOptions(16, 256, kv))) {
            EngineDriver driver = new EngineDriver();
            for (int i = 0; i < 1000; i++) {
                int[] prompt = Arrays.copyOf(system, 512 + 8 + random.nextInt(33));
                for (int t = 512; t < prompt.length; t++) {
                    prompt[t] = 3 + random.nextInt(381);
                }
                engine.submit(GenerationRequest.builder("q" + i).promptTokenIds(prompt)
                        .sampling(SamplingReqConfig.greedy()).maxTokens(2).ignoreEos(true).build());
                if (i == 0) {
                    driver.drain(engine, 10_000);
                }
            }
            driver.drain(engine, 1_000_000);
            assertThat(driver.failures).isEmpty();
            EngineStats stats = engine.stats();
            double served = (double) stats.prefixHitTokens() / stats.promptTokens();
            System.out.printf("shared 512-token system prompt, 1,000 requests: %d of %d prompt tokens (%.1f %%) from"
                    + " the cache%n", stats.prefixHitTokens(), stats.promptTokens(), 100 * served);
            assertThat(served).isGreaterThanOrEqualTo(0.90);
            assertThat(driver.finished.get("q1").cachedPromptTokens()).isEqualTo(512);
        }
    }
}
