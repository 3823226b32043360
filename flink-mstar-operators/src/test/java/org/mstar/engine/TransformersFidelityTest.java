package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.io.SafetensorsFile;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.resources.SamplingReqConfig;

/**
 * The engine on the CPU (fp32) against transformers on tiny random checkpoints of each architecture that needs more
 * than the Llama forward (fixtures written by {@code scripts/fixtures/write_model_fixtures.py}): for each prompt,
 * transformers' greedy continuation of 120 tokens and the logits each token was chosen from. The engine must pick
 * the same tokens and its logits must agree within 1e-4, with each request alone and with all of them batched
 * under a small token budget (prompts prefilled in chunks, beside each other's decodes). Gemma 3's and Phi-3's
 * windows (16 and 24 tokens) are far shorter than the sequences, so the windowed layers are exercised throughout,
 * also with their KV released as it leaves the window. OLMoE's and Qwen3-MoE's routed experts (top 2 of 8, a dense
 * layer in Qwen3-MoE) run also through the decode-graph path, and so does DeepSeek-V2 with its latent attention over
 * latent KV pages: every layer dense, and a dense first layer before routed and shared experts (greedy, and
 * group-limited with routed scaling).
 */
class TransformersFidelityTest {
    private static final float TOLERANCE = 1e-4f;
    private static CpuDevice cpu;

    @BeforeAll
    static void start() {
        cpu = new CpuDevice(2);
    }

    @AfterAll
    static void stop() {
        cpu.close();
    }

    record Reference(List<int[]> prompts, List<int[]> tokens, List<float[][]> logits) {}

    @ParameterizedTest
    @ValueSource(strings = {"qwen3", "gemma3_text", "phi3", "olmoe", "qwen3_moe", "deepseek_v2_dense",
            "deepseek_v2_lite", "deepseek_v2"})
    void eachRequestAloneMatchesTransformers(String arch) throws Exception {
        Reference ref = reference(arch);
        for (int p = 0; p < ref.prompts().size(); p++) {
            run(arch, ref, List.of(p), new EngineOptions(16, 256, KvCacheOptions.builder().maxSeqLen(512)
                    .maxNumPages(128).prefixCache(false).build()));
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"qwen3", "gemma3_text", "phi3", "olmoe", "qwen3_moe", "deepseek_v2_dense",
            "deepseek_v2_lite", "deepseek_v2"})
    void batchedChunkedRequestsMatchTransformers(String arch) throws Exception {
        Reference ref = reference(arch);
        // 7 tokens a step: every prompt is prefilled in chunks, and the later ones beside the earlier ones' decodes
        run(arch, ref, List.of(0, 1, 2), new EngineOptions(16, 7, KvCacheOptions.builder().maxSeqLen(512)
                .maxNumPages(128).pageSize(4).prefixCache(false).build()));
    }

    /** The mixtures of experts' decode steps through the graph path (on the CPU a replay re-runs the ops). */
    @ParameterizedTest
    @ValueSource(strings = {"olmoe", "qwen3_moe"})
    void mixtureOfExpertsThroughDecodeGraphsMatchesTransformers(String arch) throws Exception {
        run(arch, reference(arch), List.of(0, 1, 2), new EngineOptions(16, 7, KvCacheOptions.builder().maxSeqLen(512)
                .maxNumPages(128).pageSize(4).prefixCache(false).build(), true));
    }

    /** Gemma 3's windowed layers on a cache of their own, where each request keeps only its last 16 tokens. */
    @Test
    void gemma3WithItsWindowedLayersOnABoundedCacheMatchesTransformers() throws Exception {
        Reference ref = reference("gemma3_text");
        KvCacheOptions kv = KvCacheOptions.builder().maxSeqLen(512).maxNumPages(128).pageSize(4).prefixCache(false)
                .windowedLayerPages(40).build();
        for (int p = 0; p < ref.prompts().size(); p++) {
            run("gemma3_text", ref, List.of(p), new EngineOptions(16, 256, kv));
        }
        run("gemma3_text", ref, List.of(0, 1, 2), new EngineOptions(16, 7, kv));
        // decode steps through the graph path (on the CPU a replay re-runs the ops over leased plans)
        run("gemma3_text", ref, List.of(0, 1, 2), new EngineOptions(16, 7, kv, true));
    }

    /** Phi-3 (every layer windowed, 24 tokens) on its one cache keeping only each request's window. */
    @Test
    void phi3KeepingOnlyItsWindowMatchesTransformers() throws Exception {
        Reference ref = reference("phi3");
        KvCacheOptions kv = KvCacheOptions.builder().maxSeqLen(512).maxNumPages(128).pageSize(4).prefixCache(false)
                .windowedLayerPages(2).build();
        for (int p = 0; p < ref.prompts().size(); p++) {
            run("phi3", ref, List.of(p), new EngineOptions(16, 256, kv));
        }
        run("phi3", ref, List.of(0, 1, 2), new EngineOptions(16, 7, kv));
        run("phi3", ref, List.of(0, 1, 2), new EngineOptions(16, 7, kv, true));
    }

    /**
     * DeepSeek-V2's latent pages in 4-token pages, decode steps through the graph path (replayed over leased plans):
     * every layer dense, and the two layouts with a dense first layer and experts after it (Lite's greedy routing;
     * the full model's low-rank query and group-limited routing scaled by 2.5), each with a shared expert.
     */
    @ParameterizedTest
    @ValueSource(strings = {"deepseek_v2_dense", "deepseek_v2_lite", "deepseek_v2"})
    void deepseekV2WithDecodeGraphsMatchesTransformers(String arch) throws Exception {
        KvCacheOptions kv = KvCacheOptions.builder().maxSeqLen(512).maxNumPages(128).pageSize(4).prefixCache(false)
                .build();
        run(arch, reference(arch), List.of(0, 1, 2), new EngineOptions(16, 7, kv, true));
    }

    private static void run(String arch, Reference ref, List<Integer> prompts, EngineOptions options) throws Exception {
        try (LlamaEngine engine = LlamaEngineLoader.load(folder(arch), cpu, options)) {
            run(arch, ref, prompts, engine);
        }
    }

    /** Runs the prompts through {@code engine}, greedy, and checks every token and its logits against the reference. */
    static void run(String arch, Reference ref, List<Integer> prompts, CoreFacade engine) {
        Map<String, Map<Integer, float[]>> seen = new HashMap<>();
        engine.observeLogits((rid, index, logits) -> seen.computeIfAbsent(rid, k -> new HashMap<>())
                .put(index, logits.clone()));
        for (int p : prompts) {
            int steps = ref.tokens().get(p).length;
            engine.submit(GenerationRequest.builder("p" + p).promptTokenIds(ref.prompts().get(p))
                    .sampling(SamplingReqConfig.greedy()).maxTokens(steps).ignoreEos(true).build());
        }
        EngineDriver driver = new EngineDriver();
        float worst = 0;
        driver.drain(engine, 10_000);
        assertThat(driver.failures).isEmpty();
        for (int p : prompts) {
            String rid = "p" + p;
            int[] expected = ref.tokens().get(p);
            for (int i = 0; i < expected.length; i++) {
                float[] got = seen.get(rid).get(i);
                float[] want = ref.logits().get(p)[i];
                worst = Math.max(worst, maxAbsDiff(got, want));
                assertThat(maxAbsDiff(got, want)).as("%s prompt %d logits of token %d", arch, p, i)
                        .isLessThanOrEqualTo(TOLERANCE);
            }
            assertThat(driver.tokens.get(rid)).as("%s prompt %d greedy tokens", arch, p)
                    .containsExactly(Arrays.stream(expected).boxed().toArray(Integer[]::new));
        }
        // the number docs/guides/models.md reports
        System.out.printf("%s prompts %s: largest |logit - transformers'| %.3g%n", arch, prompts, worst);
    }

    private static float maxAbsDiff(float[] a, float[] b) {
        assertThat(a).hasSameSizeAs(b);
        float max = 0;
        for (int i = 0; i < a.length; i++) {
            max = Math.max(max, Math.abs(a[i] - b[i]));
        }
        return max;
    }

    static Path folder(String arch) throws URISyntaxException {
        return Path.of(TransformersFidelityTest.class.getResource("/org/mstar/model/fixtures/" + arch).toURI());
    }

    static Reference reference(String arch) throws IOException, URISyntaxException {
        List<int[]> prompts = new ArrayList<>();
        List<int[]> tokens = new ArrayList<>();
        List<float[][]> logits = new ArrayList<>();
        try (SafetensorsFile f = SafetensorsFile.open(folder(arch).resolve("reference.safetensors"))) {
            for (int p = 0; f.contains("prompt." + p); p++) {
                prompts.add(ints(f.bytes("prompt." + p)));
                tokens.add(ints(f.bytes("tokens." + p)));
                long[] shape = f.info("logits." + p).shape();
                ByteBuffer b = f.bytes("logits." + p).order(ByteOrder.LITTLE_ENDIAN);
                float[][] rows = new float[(int) shape[0]][(int) shape[1]];
                for (float[] row : rows) {
                    b.asFloatBuffer().get(row);
                    b.position(b.position() + row.length * Float.BYTES);
                }
                logits.add(rows);
            }
        }
        assertThat(prompts).hasSize(3);
        return new Reference(prompts, tokens, logits);
    }

    private static int[] ints(ByteBuffer b) {
        var ib = b.order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
        int[] out = new int[ib.remaining()];
        ib.get(out);
        return out;
    }
}
