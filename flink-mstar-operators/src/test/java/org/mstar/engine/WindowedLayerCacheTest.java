package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.GenerationConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.kv.KVManager;

/**
 * Gemma 3's windowed layers on a cache of their own: the KV a request holds, measured in pages of each cache while
 * it generates, against one cache for every layer; and the combinations that cannot work refused by name. (That the
 * tokens and logits stay transformers' is {@link TransformersFidelityTest}'s.)
 */
class WindowedLayerCacheTest {
    private static final int PAGE = 4;
    private static CpuDevice cpu;

    @BeforeAll
    static void start() {
        cpu = new CpuDevice(2);
    }

    @AfterAll
    static void stop() {
        cpu.close();
    }

    /** Bytes of KV the one request holds, sampled when it has generated {@code atToken} tokens. */
    private static long heldBytes(KvCacheOptions kv, int atToken, int[] sequenceLength) throws Exception {
        long[] held = new long[1];
        try (LlamaWeights weights = LlamaEngineLoader.loadWeights(TransformersFidelityTest.folder("gemma3_text"), cpu)) {
            LlamaModel model = new LlamaModel(weights, DType.F32, "gemma3 fixture");
            try (LlamaEngine engine = new LlamaEngine(model, null, GenerationConfig.of(weights.config()),
                    new EngineOptions(4, 64, kv), DType.F32)) {
                KVManager main = model.resources().kv();
                KVManager windowed = model.resources().kvWindowed();
                int mainFree = main.freePages();
                int windowedFree = windowed == null ? 0 : windowed.freePages();
                int[] prompt = new int[41];
                for (int i = 0; i < prompt.length; i++) {
                    prompt[i] = 3 + (i * 37) % 300;
                }
                engine.observeLogits((rid, index, logits) -> {
                    if (index == atToken) {
                        long perToken = 2L * weights.config().numKvHeads() * weights.config().headDim() * Float.BYTES;
                        int globalLayers = windowed == null ? weights.config().numLayers() : 1;
                        held[0] = (long) (mainFree - main.freePages()) * PAGE * perToken * globalLayers
                                + (windowed == null ? 0 : (long) (windowedFree - windowed.freePages()) * PAGE * perToken
                                * (weights.config().numLayers() - globalLayers));
                        sequenceLength[0] = prompt.length + index;
                    }
                });
                engine.submit(new GenerationRequest("long", prompt, null, SamplingReqConfig.greedy(), atToken + 1, 0,
                        List.of(), true, 0));
                new EngineDriver().drain(engine, 1_000);
            }
        }
        return held[0];
    }

    @Test
    void windowedLayersHoldTheirWindowInsteadOfTheWholeSequence() throws Exception {
        int[] len = new int[1];
        KvCacheOptions one = new KvCacheOptions(512, 128, PAGE, 0, false);
        long everything = heldBytes(one, 110, len);
        long bounded = heldBytes(one.withWindowedLayerPages(32), 110, len);

        // 151 tokens: one cache keeps 38 pages of every layer (4); apart, the global layer keeps 38 pages and the
        // three windowed layers at most their 16-token window in whole pages plus the partial tail page and the
        // page in flight: 6
        long perPageLayer = 2L * 2 * 32 * Float.BYTES * PAGE;
        // the numbers docs/models.md reports
        System.out.printf("gemma3 fixture, %d tokens: one cache %d bytes, windowed layers apart %d bytes%n", len[0],
                everything, bounded);
        assertThat(len[0]).isEqualTo(151);
        assertThat(everything).isEqualTo(38 * 4 * perPageLayer);
        assertThat(bounded).isLessThanOrEqualTo((38 + 3 * 6) * perPageLayer).isGreaterThanOrEqualTo((38 + 3 * 4) * perPageLayer);
    }

    @Test
    void combinationsThatCannotWorkAreRefused() throws Exception {
        assertThatThrownBy(() -> new KvCacheOptions(512, 128, PAGE, 0, true, 32))
                .hasMessageContaining("prefix cache off");
        assertThatThrownBy(() -> new EngineOptions(4, 64, new KvCacheOptions(512, 128, PAGE, 0, false, 32))
                .withRole(EngineRole.PREFILL)).hasMessageContaining("colocated");
        try (LlamaWeights weights = LlamaEngineLoader.loadWeights(TransformersFidelityTest.folder("phi3"), cpu)) {
            LlamaModel model = new LlamaModel(weights, DType.F32, "phi3 fixture");
            assertThatThrownBy(() -> model.declareResources(new KvCacheOptions(512, 128, PAGE, 0, false, 32), List.of()))
                    .hasMessageContaining("both windowed and global layers");
        }
    }
}
