package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.engine.TransformersFidelityTest.Reference;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.mamba.StateSnapshots;
import org.mstar.resources.SamplingReqConfig;

/**
 * Mamba2 and Bamba on the CPU (fp32) against transformers, as {@link TransformersFidelityTest} checks the Llama
 * family: the same greedy tokens over 120 steps and logits within 1e-4, each request alone (its prompt one scan),
 * all batched at 7 tokens a step (prompts scanned in chunks that continue from the stored state, beside the others'
 * decode rows; again with decode steps as graph replays), batched on a KV cache too small for all three, so
 * requests are preempted and recomputed from their prompt and generated tokens into a fresh state (also with the
 * prefix cache's state snapshots taken every 4 prompt tokens), and resumed
 * after some tokens as a restore from a checkpoint resumes them. The fixtures
 * chunk the scan by 16 tokens in 2 groups of a 16-wide state, with a 4-wide convolution; Bamba's layer 1 is
 * attention.
 */
class RecurrentFidelityTest {
    private static CpuDevice cpu;

    @BeforeAll
    static void start() {
        cpu = new CpuDevice(2);
    }

    @AfterAll
    static void stop() {
        cpu.close();
    }

    private static KvCacheOptions.Builder kv() {
        return KvCacheOptions.builder().maxSeqLen(512).pageSize(4).prefixCache(false);
    }

    @ParameterizedTest
    @ValueSource(strings = {"mamba2", "bamba"})
    void eachRequestAloneMatchesTransformers(String arch) throws Exception {
        Reference ref = TransformersFidelityTest.reference(arch);
        for (int p = 0; p < ref.prompts().size(); p++) {
            try (HybridEngine engine = HybridEngineLoader.load(TransformersFidelityTest.folder(arch), cpu,
                    new EngineOptions(16, 256, kv().maxNumPages(128).build()))) {
                TransformersFidelityTest.run(arch, ref, List.of(p), engine);
            }
        }
    }

    /** All three prompts at 7 tokens a step on {@code pages} pages of 4 tokens, then {@code after} on the engine. */
    private static void batched(String arch, int pages, boolean decodeGraphs, Consumer<HybridEngine> after)
            throws Exception {
        batched(arch, kv().maxNumPages(pages).build(), decodeGraphs, StateSnapshots.defaults(16), after);
    }

    private static void batched(String arch, KvCacheOptions kv, boolean decodeGraphs, StateSnapshots snapshots,
                                Consumer<HybridEngine> after) throws Exception {
        try (HybridEngine engine = HybridEngineLoader.load(TransformersFidelityTest.folder(arch), cpu,
                new EngineOptions(16, 7, kv, decodeGraphs), snapshots)) {
            TransformersFidelityTest.run(arch, TransformersFidelityTest.reference(arch), List.of(0, 1, 2), engine);
            after.accept(engine);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"mamba2", "bamba"})
    void batchedChunkedRequestsMatchTransformers(String arch) throws Exception {
        batched(arch, 128, false, engine -> { });
    }

    @ParameterizedTest
    @ValueSource(strings = {"mamba2", "bamba"})
    void decodeStepsAsGraphReplaysMatchTransformers(String arch) throws Exception {
        batched(arch, 128, true, engine -> assertThat(engine.decodeGraphReplays()).as("replays").isPositive());
    }

    /**
     * What a restore from a Flink checkpoint does: each request taken up again with the tokens it had emitted (40, 77
     * and 119 of 120), its state rebuilt from prompt and those tokens, must go on with transformers' tokens and logits.
     */
    @ParameterizedTest
    @ValueSource(strings = {"mamba2", "bamba"})
    void resumedRequestsContinueAsTransformers(String arch) throws Exception {
        Reference ref = TransformersFidelityTest.reference(arch);
        int[] emitted = {40, 77, 119};
        Map<String, Map<Integer, float[]>> seen = new HashMap<>();
        try (HybridEngine engine = HybridEngineLoader.load(TransformersFidelityTest.folder(arch), cpu,
                new EngineOptions(16, 7, kv().maxNumPages(128).build()))) {
            engine.observeLogits((rid, index, logits) -> seen.computeIfAbsent(rid, k -> new HashMap<>())
                    .put(index, logits.clone()));
            for (int p = 0; p < emitted.length; p++) {
                int[] tokens = ref.tokens().get(p);
                engine.resume(GenerationRequest.builder("p" + p).promptTokenIds(ref.prompts().get(p))
                        .sampling(SamplingReqConfig.greedy()).maxTokens(tokens.length).ignoreEos(true).build(),
                        Arrays.copyOf(tokens, emitted[p]));
            }
            EngineDriver driver = new EngineDriver();
            driver.drain(engine, 10_000);
            assertThat(driver.failures).isEmpty();
            for (int p = 0; p < emitted.length; p++) {
                int[] tokens = ref.tokens().get(p);
                assertThat(driver.tokens.get("p" + p)).as("%s prompt %d tokens after the resume", arch, p)
                        .containsExactly(Arrays.stream(tokens, emitted[p], tokens.length).boxed()
                                .toArray(Integer[]::new));
                for (int i = emitted[p]; i < tokens.length; i++) {
                    float[] got = seen.get("p" + p).get(i);
                    float[] want = ref.logits().get(p)[i];
                    for (int v = 0; v < want.length; v++) {
                        assertThat(Math.abs(got[v] - want[v])).as("%s prompt %d logit %d of token %d", arch, p, v, i)
                                .isLessThanOrEqualTo(1e-4f);
                    }
                }
            }
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"mamba2", "bamba"})
    void preemptedAndRecomputedRequestsMatchTransformers(String arch) throws Exception {
        // the three sequences need 32, 36 and 41 pages of 4 tokens: 80 pages hold two of them, not three
        batched(arch, 80, false, engine -> assertThat(engine.stats().preemptions()).as("preemptions").isPositive());
    }

    /**
     * The same with the prefix cache on and a state snapshot every 4 prompt tokens: prefill chunks end at every 4th
     * token, snapshots are taken and evicted while pages run short and requests are preempted and recomputed.
     */
    @ParameterizedTest
    @ValueSource(strings = {"mamba2", "bamba"})
    void preemptedRequestsWithStateSnapshotsMatchTransformers(String arch) throws Exception {
        batched(arch, kv().maxNumPages(80).prefixCache(true).build(), false, new StateSnapshots(4, 4),
                engine -> assertThat(engine.stats().preemptions()).as("preemptions").isPositive());
    }
}
