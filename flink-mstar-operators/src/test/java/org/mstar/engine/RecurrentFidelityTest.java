package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.engine.TransformersFidelityTest.Reference;
import org.mstar.model.llama.KvCacheOptions;

/**
 * Mamba2 and Bamba on the CPU (fp32) against transformers, as {@link TransformersFidelityTest} checks the Llama
 * family: the same greedy tokens over 120 steps and logits within 1e-4, each request alone (its prompt one scan),
 * all batched at 7 tokens a step (prompts scanned in chunks that continue from the stored state, beside the others'
 * decode rows; again with decode steps as graph replays), and batched on a KV cache too small for all three, so
 * requests are preempted and recomputed from their prompt and generated tokens into a fresh state. The fixtures
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

    @ParameterizedTest
    @ValueSource(strings = {"mamba2", "bamba"})
    void batchedChunkedRequestsMatchTransformers(String arch) throws Exception {
        Reference ref = TransformersFidelityTest.reference(arch);
        try (HybridEngine engine = HybridEngineLoader.load(TransformersFidelityTest.folder(arch), cpu,
                new EngineOptions(16, 7, kv().maxNumPages(128).build()))) {
            TransformersFidelityTest.run(arch, ref, List.of(0, 1, 2), engine);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"mamba2", "bamba"})
    void decodeStepsAsGraphReplaysMatchTransformers(String arch) throws Exception {
        Reference ref = TransformersFidelityTest.reference(arch);
        try (HybridEngine engine = HybridEngineLoader.load(TransformersFidelityTest.folder(arch), cpu,
                new EngineOptions(16, 7, kv().maxNumPages(128).build(), true))) {
            TransformersFidelityTest.run(arch, ref, List.of(0, 1, 2), engine);
            assertThat(engine.decodeGraphReplays()).as("graph replays").isPositive();
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"mamba2", "bamba"})
    void preemptedAndRecomputedRequestsMatchTransformers(String arch) throws Exception {
        Reference ref = TransformersFidelityTest.reference(arch);
        // the three sequences need 32, 36 and 41 pages of 4 tokens: 80 pages hold two of them, not three
        try (HybridEngine engine = HybridEngineLoader.load(TransformersFidelityTest.folder(arch), cpu,
                new EngineOptions(16, 7, kv().maxNumPages(80).build()))) {
            TransformersFidelityTest.run(arch, ref, List.of(0, 1, 2), engine);
            assertThat(engine.stats().preemptions()).as("preemptions").isPositive();
        }
    }
}
