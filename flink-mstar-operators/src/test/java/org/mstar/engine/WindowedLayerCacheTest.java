package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.GenerationConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.kv.KVManager;

/**
 * Windowed layers keeping only their window: Gemma 3's on a cache of their own, and Phi-3's and Mistral's (every layer
 * windowed) on their one cache under the same retention. The KV a request holds, measured in pages of each cache while
 * it generates, against keeping every token; a Mistral engine under retention against the dense reference through
 * chunking, batching, decode graphs and preemption; and the combinations that cannot work refused by name. (That the tokens and
 * logits stay transformers' is {@link TransformersFidelityTest}'s.)
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

    /**
     * Bytes of KV that {@code requests} requests of 41 prompt tokens hold together, sampled when the first has
     * generated {@code atToken} tokens (the others, submitted with it, are a token or two behind and generate longer,
     * so they are all live then).
     */
    private static long heldBytes(String arch, KvCacheOptions kv, int requests, int atToken, int[] sequenceLength)
            throws Exception {
        long[] held = new long[1];
        try (LlamaWeights weights = LlamaEngineLoader.loadWeights(TransformersFidelityTest.folder(arch), cpu)) {
            LlamaModel model = new LlamaModel(weights, DType.F32, arch + " fixture");
            try (LlamaEngine engine = new LlamaEngine(model, null, GenerationConfig.of(weights.config()),
                    new EngineOptions(4, 64, kv), DType.F32)) {
                KVManager main = model.resources().kv();
                KVManager windowed = model.resources().kvWindowed();
                int mainFree = main.freePages();
                int windowedFree = windowed == null ? 0 : windowed.freePages();
                int layers = weights.config().numLayers();
                int windowedLayers = 0;
                for (int l = 0; l < layers; l++) {
                    windowedLayers += weights.config().attentionWindow(l) > 0 ? 1 : 0;
                }
                int mainLayers = windowed == null ? layers : layers - windowedLayers;
                long perToken = 2L * weights.config().numKvHeads() * weights.config().headDim() * Float.BYTES;
                engine.observeLogits((rid, index, logits) -> {
                    if (rid.equals("long0") && index == atToken) {
                        held[0] = (long) (mainFree - main.freePages()) * PAGE * perToken * mainLayers
                                + (windowed == null ? 0 : (long) (windowedFree - windowed.freePages()) * PAGE * perToken
                                * (layers - mainLayers));
                        sequenceLength[0] = 41 + index;
                    }
                });
                for (int r = 0; r < requests; r++) {
                    int[] prompt = new int[41];
                    for (int i = 0; i < prompt.length; i++) {
                        prompt[i] = 3 + (i * 37 + r * 11) % 300;
                    }
                    engine.submit(GenerationRequest.builder("long" + r).promptTokenIds(prompt)
                            .sampling(SamplingReqConfig.greedy()).maxTokens(atToken + 1 + 10 * r).ignoreEos(true)
                            .build());
                }
                EngineDriver driver = new EngineDriver();
                driver.drain(engine, 1_000);
                assertThat(driver.failures).isEmpty();
            }
        }
        return held[0];
    }

    @Test
    void windowedLayersHoldTheirWindowInsteadOfTheWholeSequence() throws Exception {
        int[] len = new int[1];
        KvCacheOptions one = KvCacheOptions.builder().maxSeqLen(512).maxNumPages(128).pageSize(PAGE)
                .prefixCache(false).build();
        long everything = heldBytes("gemma3_text", one, 1, 110, len);
        long bounded = heldBytes("gemma3_text", one.withWindowedLayerPages(32), 1, 110, len);

        // 151 tokens: one cache keeps 38 pages of every layer (4); apart, the global layer keeps 38 pages and the
        // three windowed layers at most their 16-token window in whole pages plus the partial tail page and the
        // page in flight: 6
        long perPageLayer = 2L * 2 * 32 * Float.BYTES * PAGE;
        // the numbers docs/guides/models.md reports
        System.out.printf("gemma3 fixture, %d tokens: one cache %d bytes, windowed layers apart %d bytes%n", len[0],
                everything, bounded);
        assertThat(len[0]).isEqualTo(151);
        assertThat(everything).isEqualTo(38 * 4 * perPageLayer);
        assertThat(bounded).isLessThanOrEqualTo((38 + 3 * 6) * perPageLayer).isGreaterThanOrEqualTo((38 + 3 * 4) * perPageLayer);
    }

    @Test
    void aModelWhoseEveryLayerIsWindowedHoldsOnlyItsWindow() throws Exception {
        int[] len = new int[1];
        KvCacheOptions one = KvCacheOptions.builder().maxSeqLen(512).maxNumPages(128).pageSize(PAGE)
                .prefixCache(false).build();
        // Phi-3 fixture: 3 layers, all windowed (24 tokens), 2 KV heads of 16
        long perPage = 2L * 2 * 16 * Float.BYTES * PAGE * 3;
        long everything = heldBytes("phi3", one, 1, 110, len);
        long bounded = heldBytes("phi3", one.withWindowedLayerPages(2), 1, 110, len);
        long everythingBatched = heldBytes("phi3", one, 3, 110, len);
        long boundedBatched = heldBytes("phi3", one.withWindowedLayerPages(2), 3, 110, len);
        // the numbers docs/guides/models.md reports
        System.out.printf("phi3 fixture, %d tokens: every token kept %d bytes (3 requests %d), window only %d bytes"
                + " (3 requests %d)%n", len[0], everything, everythingBatched, bounded, boundedBatched);

        // 151 tokens keep 38 pages; the window keeps 24 tokens in whole pages (6), plus the partial tail page and the
        // page in flight: at most 8
        assertThat(len[0]).isEqualTo(151);
        assertThat(everything).isEqualTo(38 * perPage);
        assertThat(bounded).isBetween(6 * perPage, 8 * perPage);
        // batched, the two later requests are within a couple of tokens of the first
        assertThat(everythingBatched).isBetween(3 * 37 * perPage, 3 * 38 * perPage);
        assertThat(boundedBatched).isBetween(3 * 6 * perPage, 3 * 8 * perPage);
    }

    /**
     * Mistral (window 6) keeping only its window: the dense reference's logits while prompts chunk and batch, eagerly
     * and with decode steps through the graph path, with one request longer than the whole pool (refused when every
     * token is kept), and running requests preempted for one that outranks them (their windows offloaded to host
     * pages and reloaded, or freed and recomputed).
     */
    @ParameterizedTest(name = "decode graphs {0}, host pages {1}")
    @CsvSource({"false, 0", "true, 0", "false, 64"})
    void aMistralKeepingOnlyItsWindowMatchesTheDenseReference(boolean graphs, int hostPages, @TempDir Path dir)
            throws Exception {
        try (LlamaModel model = RandomModels.load(RandomModels.mistral(), 7, dir, cpu)) {
            DenseLlamaReference reference = new DenseLlamaReference(model.weights());
            // 4 rows, 16 tokens a step, pages of 4, 8 usable pages: requests of up to 8 pages each share them
            EngineOptions options = new EngineOptions(4, 16,
                    KvCacheOptions.builder().maxSeqLen(256).maxNumPages(9).pageSize(4).cpuOffloadPages(hostPages)
                            .prefixCache(false).windowedLayerPages(2).build(), graphs);
            Map<String, List<float[]>> logits = new HashMap<>();
            Map<String, int[]> prompts = new HashMap<>();
            EngineDriver driver = new EngineDriver();
            try (LlamaEngine engine = RandomModels.engine(model, options)) {
                engine.observeLogits((rid, index, l) -> logits.computeIfAbsent(rid, k -> new ArrayList<>()).add(l));
                Random rnd = new Random(11);
                for (int i = 0; i < 6; i++) {
                    prompts.put("r" + i, RandomModels.prompt(rnd, 4 + 3 * i));
                    engine.submit(GenerationRequest.builder("r" + i).promptTokenIds(prompts.get("r" + i))
                            .sampling(SamplingReqConfig.greedy()).maxTokens(12).ignoreEos(true).build());
                }
                // 40 + 30 tokens need 18 pages kept whole, more than the pool has; its window needs at most 7
                prompts.put("long", RandomModels.prompt(rnd, 40));
                engine.submit(GenerationRequest.builder("long").promptTokenIds(prompts.get("long"))
                        .sampling(SamplingReqConfig.greedy()).maxTokens(30).ignoreEos(true).build());
                for (int i = 0; i < 6; i++) {
                    driver.collect(engine.step());
                }
                // a request that outranks the running ones while the pool is full: some give way (offloaded when
                // there are host pages, else freed and recomputed)
                prompts.put("urgent", RandomModels.prompt(rnd, 24));
                engine.submit(GenerationRequest.builder("urgent").promptTokenIds(prompts.get("urgent"))
                        .sampling(SamplingReqConfig.greedy()).maxTokens(8).ignoreEos(true).priority(5).build());
                boolean offloaded = false;
                for (int steps = 0; engine.hasWork(); steps++) {
                    assertThat(steps).as("steps").isLessThan(1_000);
                    driver.collect(engine.step());
                    offloaded |= prompts.keySet().stream().anyMatch(model.resources().kv()::isOffloaded);
                }
                assertThat(engine.stats().preemptions()).as("preemptions").isPositive();
                assertThat(offloaded).as("a request offloaded").isEqualTo(hostPages > 0);
                assertThat(driver.failures).isEmpty();
                assertThat(driver.finished).hasSize(prompts.size());
                assertThat(engine.decodeGraphReplays() > 0).as("decode steps replayed").isEqualTo(graphs);
                assertThat(driver.tokens.get("long")).hasSize(30);
            }
            try (LlamaEngine keepsAll = RandomModels.engine(model, new EngineOptions(4, 16,
                    KvCacheOptions.builder().maxSeqLen(256).maxNumPages(9).pageSize(4).prefixCache(false).build(),
                    graphs))) {
                assertThatThrownBy(() -> keepsAll.submit(GenerationRequest.builder("long")
                        .promptTokenIds(prompts.get("long")).sampling(SamplingReqConfig.greedy()).maxTokens(30)
                        .ignoreEos(true).build())).hasMessageContaining("18 KV pages");
            }
            EngineEquivalenceTest.assertEveryTokenClose(prompts, driver, logits, reference::lastLogits);
        }
    }

    @Test
    void combinationsThatCannotWorkAreRefused() throws Exception {
        assertThatThrownBy(() -> KvCacheOptions.builder().maxSeqLen(512).maxNumPages(128).pageSize(PAGE)
                .prefixCache(true).windowedLayerPages(32).build())
                .hasMessageContaining("prefix cache off");
        assertThatThrownBy(() -> new EngineOptions(4, 64, KvCacheOptions.builder().maxSeqLen(512).maxNumPages(128)
                .pageSize(PAGE).prefixCache(false).windowedLayerPages(32).build())
                .withRole(EngineRole.PREFILL)).hasMessageContaining("colocated");
        assertThatThrownBy(() -> new EngineOptions(4, 64, KvCacheOptions.builder().maxSeqLen(512).maxNumPages(128)
                .pageSize(PAGE).prefixCache(false).windowedLayerPages(2).build())
                .withRole(EngineRole.DECODE)).hasMessageContaining("colocated");
        try (LlamaWeights weights = LlamaEngineLoader.loadWeights(TransformersFidelityTest.folder("qwen3"), cpu)) {
            LlamaModel model = new LlamaModel(weights, DType.F32, "qwen3 fixture");
            assertThatThrownBy(() -> model.declareResources(KvCacheOptions.builder().maxSeqLen(512).maxNumPages(128)
                    .pageSize(PAGE).prefixCache(false).windowedLayerPages(32).build(), List.of()))
                    .hasMessageContaining("needs windowed layers");
        }
    }
}
