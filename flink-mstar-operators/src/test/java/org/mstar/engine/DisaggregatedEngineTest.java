package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
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
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.lora.RandomPeftAdapters;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.kv.PublishedKVInfo;
import org.mstar.resources.position.PublishedPositionCodec;

/**
 * A prefill engine and a decode engine, handing each request over after its first token, generate token for token
 * what one colocated engine does; the decode side imports only what its own prefix cache lacks.
 */
class DisaggregatedEngineTest {
    private static final int PAGE = 4;

    @TempDir
    static Path dir;
    static CpuDevice cpu;
    static LlamaModel model;
    /** The same weights again: a model serves one engine at a time, and the decode engine lives beside another. */
    static LlamaModel decodeModel;

    @BeforeAll
    static void load() throws Exception {
        cpu = new CpuDevice(2);
        model = RandomModels.load(RandomModels.llama(), 3, dir, cpu);
        decodeModel = new LlamaModel(model.weights(), DType.F32, "random:3");
    }

    @AfterAll
    static void close() {
        model.close();
        cpu.close();
    }

    private static EngineOptions options(int budget, EngineRole role) {
        return RandomModels.options(8, budget, 200, PAGE, 0).withRole(role);
    }

    private static GenerationRequest request(String rid, int[] prompt, SamplingReqConfig sampling, int maxTokens) {
        return GenerationRequest.builder(rid).promptTokenIds(prompt).sampling(sampling).maxTokens(maxTokens)
                .ignoreEos(true).build();
    }

    private static GenerationRequest greedy(String rid, int[] prompt) {
        return request(rid, prompt, SamplingReqConfig.DEFAULTS, 9);
    }

    private static GenerationRequest sampled(String rid, int[] prompt, long seed) {
        return request(rid, prompt, SamplingReqConfig.DEFAULTS.withTemperature(0.9).withSeed(seed), 9);
    }

    /** Prompts of mixed lengths, two pairs sharing a prefix (one of whole pages, one ending mid-page). */
    private static List<GenerationRequest> workload() {
        Random rnd = new Random(11);
        int[] base = RandomModels.prompt(rnd, 14);
        int[] sharedWhole = concat(java.util.Arrays.copyOf(base, 12), RandomModels.prompt(rnd, 7));
        int[] sharedPart = concat(java.util.Arrays.copyOf(base, 10), RandomModels.prompt(rnd, 3));
        List<GenerationRequest> requests = new ArrayList<>();
        requests.add(greedy("g-base", base));
        requests.add(sampled("s-whole", sharedWhole, 41));
        requests.add(greedy("g-part", sharedPart));
        requests.add(sampled("s-long", RandomModels.prompt(rnd, 29), 7));
        requests.add(greedy("g-short", RandomModels.prompt(rnd, 3)));
        requests.add(request("one-token", RandomModels.prompt(rnd, 6), SamplingReqConfig.DEFAULTS, 1));
        return requests;
    }

    private static int[] concat(int[] a, int[] b) {
        int[] out = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    /** Tokens per request by index, from any number of engines. */
    private static final class Collected {
        final Map<String, Map<Integer, Integer>> tokens = new HashMap<>();
        final Map<String, FinishedRequest> finished = new HashMap<>();
        final List<RequestFailure> failures = new ArrayList<>();

        void add(StepResult r) {
            for (TokenOutput t : r.tokens()) {
                Integer before = tokens.computeIfAbsent(t.requestId(), k -> new HashMap<>()).put(t.index(), t.tokenId());
                assertThat(before).as("token %d of %s emitted twice", t.index(), t.requestId()).isNull();
            }
            r.finished().forEach(f -> finished.put(f.requestId(), f));
            failures.addAll(r.failures());
        }

        Map<String, List<Integer>> sequences() {
            Map<String, List<Integer>> out = new HashMap<>();
            tokens.forEach((rid, byIndex) -> {
                List<Integer> seq = new ArrayList<>();
                for (int i = 0; i < byIndex.size(); i++) {
                    assertThat(byIndex).as("token %d of %s", i, rid).containsKey(i);
                    seq.add(byIndex.get(i));
                }
                out.put(rid, seq);
            });
            return out;
        }
    }

    private static Map<String, List<Integer>> colocated(List<GenerationRequest> requests) {
        return colocated(model, requests);
    }

    private static Map<String, List<Integer>> colocated(LlamaModel model, List<GenerationRequest> requests) {
        try (LlamaEngine engine = RandomModels.engine(model, options(64, EngineRole.COLOCATED))) {
            Collected c = new Collected();
            requests.forEach(engine::submit);
            for (int i = 0; engine.hasWork(); i++) {
                assertThat(i).isLessThan(1_000);
                c.add(engine.step());
            }
            assertThat(c.failures).isEmpty();
            return c.sequences();
        }
    }

    /** Runs {@code requests} through {@code prefill} and on into {@code decode}, each hand-off through bytes. */
    private static Collected disaggregated(LlamaEngine prefill, LlamaEngine decode, List<GenerationRequest> requests) {
        Map<String, GenerationRequest> byId = new HashMap<>();
        requests.forEach(r -> byId.put(r.requestId(), r));
        Collected c = new Collected();
        requests.forEach(prefill::submit);
        for (int i = 0; prefill.hasWork() || decode.hasWork(); i++) {
            assertThat(i).isLessThan(2_000);
            StepResult p = prefill.step();
            c.add(p);
            for (PrefillHandoff h : p.handoffs()) {
                decode.receive(byId.get(h.requestId()), throughBytes(h));
            }
            c.add(decode.step());
        }
        assertThat(c.failures).isEmpty();
        return c;
    }

    /** The hand-off as the receiving side rebuilds it from a record's bytes: each state copied into an array. */
    private static PrefillHandoff throughBytes(PrefillHandoff h) {
        Map<String, ByteBuffer> states = new HashMap<>();
        h.states().forEach((key, bytes) -> {
            byte[] copy = new byte[bytes.remaining()];
            bytes.duplicate().get(copy);
            states.put(key, ByteBuffer.wrap(copy));
        });
        return new PrefillHandoff(h.requestId(), h.prompt(), h.generated(), states);
    }

    @Test
    void prefillAndDecodeEnginesGenerateWhatTheColocatedEngineDoes() {
        List<GenerationRequest> requests = workload();
        Map<String, List<Integer>> expected = colocated(requests);
        // a token budget of 8 chunks every longer prompt on the prefill side
        try (LlamaEngine prefill = RandomModels.engine(model, options(8, EngineRole.PREFILL));
             LlamaEngine decode = RandomModels.engine(decodeModel, options(64, EngineRole.DECODE))) {
            Collected c = disaggregated(prefill, decode, requests);
            assertThat(c.sequences()).isEqualTo(expected);
            assertThat(c.finished).containsOnlyKeys(expected.keySet());
            assertThat(expected.get("one-token")).hasSize(1);
            assertThat(prefill.hasWork()).isFalse();
            assertThat(decode.handoffBytesCopied()).isPositive();
        }
    }

    /**
     * A sliding window masks attention but releases no page: the colocated engine keeps a request's KV from token
     * 0, and so does a hand-off, so the decode side holds what the colocated engine would (window 6, prompts up to
     * 29 tokens, chunked prefill on the prefill side).
     */
    @Test
    void aSlidingWindowModelGeneratesWhatTheColocatedEngineDoes(@TempDir Path mistralDir, @TempDir Path fullDir)
            throws Exception {
        LlamaModel mistral = RandomModels.load(RandomModels.mistral(), 5, mistralDir, cpu);
        LlamaModel decodeMistral = new LlamaModel(mistral.weights(), DType.F32, "random:5");
        Map<String, List<Integer>> expected;
        try {
            List<GenerationRequest> requests = workload();
            expected = colocated(mistral, requests);
            try (LlamaEngine prefill = RandomModels.engine(mistral, options(8, EngineRole.PREFILL));
                 LlamaEngine decode = RandomModels.engine(decodeMistral, options(64, EngineRole.DECODE))) {
                Collected c = disaggregated(prefill, decode, requests);
                assertThat(c.sequences()).isEqualTo(expected);
                assertThat(c.finished.get("s-whole").cachedPromptTokens()).as("shared prefix, past the window")
                        .isEqualTo(12);
            }
        } finally {
            mistral.close();
        }
        // the same weights without the window: the window is what shaped the outputs above
        try (LlamaModel full = RandomModels.load(RandomModels.mistral().toBuilder().slidingWindow(0, 0).build(), 5,
                fullDir, cpu)) {
            assertThat(colocated(full, workload())).isNotEqualTo(expected);
        }
    }

    /**
     * Requests with LoRA adapters (two adapters and the base model, one slot each side) hand off with their adapter:
     * the decode side continues each under the adapter its prefill ran with, as the colocated engine does.
     */
    @Test
    void requestsWithAdaptersGenerateWhatTheColocatedEngineDoes(@TempDir Path adapters) throws Exception {
        RandomPeftAdapters.write(adapters, RandomModels.llama(), new RandomPeftAdapters.Spec("x", 8, 16, false,
                List.of("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")), 21);
        RandomPeftAdapters.write(adapters, RandomModels.llama(), new RandomPeftAdapters.Spec("y", 4, 8, true,
                List.of("v_proj", "down_proj")), 22);
        List<GenerationRequest> requests = new ArrayList<>();
        List<GenerationRequest> base = workload();
        for (int i = 0; i < base.size(); i++) {
            GenerationRequest r = base.get(i);
            requests.add(GenerationRequest.builder(r.requestId()).promptTokenIds(r.promptTokenIds())
                    .sampling(r.sampling()).maxTokens(r.maxTokens()).ignoreEos(true)
                    .adapter(i % 3 == 0 ? null : i % 3 == 1 ? "x" : "y").build());
        }
        AdapterOptions served = new AdapterOptions(adapters, 1);
        Map<String, List<Integer>> expected;
        try (LlamaEngine engine = RandomModels.engine(model, options(64, EngineRole.COLOCATED).withAdapters(served))) {
            Collected c = new Collected();
            requests.forEach(engine::submit);
            for (int i = 0; engine.hasWork(); i++) {
                assertThat(i).isLessThan(1_000);
                c.add(engine.step());
            }
            expected = c.sequences();
        }
        assertThat(expected).as("the adapters change the outputs").isNotEqualTo(colocated(workload()));
        try (LlamaEngine prefill = RandomModels.engine(model, options(8, EngineRole.PREFILL).withAdapters(served));
             LlamaEngine decode = RandomModels.engine(decodeModel,
                     options(64, EngineRole.DECODE).withAdapters(served))) {
            assertThat(disaggregated(prefill, decode, requests).sequences()).isEqualTo(expected);
        }
    }

    @Test
    void aHandoffCarriesAtMostTwoGibibytesOfKv() {
        // Llama-3-8B in bf16: 32 layers x K and V x 16 tokens x 8 KV heads x 128 dims x 2 bytes = 2 MiB a page
        assertThat(EngineCore.maxHandoffTokens(2L * 32 * 16 * 8 * 128 * 2, 16)).isEqualTo(1023 * 16);
        assertThat(EngineCore.maxHandoffTokens(1024, 4)).isEqualTo((Integer.MAX_VALUE - 1024) / 1024 * 4);
    }

    @Test
    void aPrefillEngineHandsOffAfterTheFirstTokenAndFreesTheRequest() {
        GenerationRequest r = greedy("r", RandomModels.prompt(new Random(2), 10));
        try (LlamaEngine prefill = RandomModels.engine(model, options(64, EngineRole.PREFILL))) {
            prefill.submit(r);
            StepResult step = prefill.step();
            assertThat(step.tokens()).singleElement().satisfies(t -> assertThat(t.index()).isZero());
            assertThat(step.finished()).isEmpty();
            PrefillHandoff h = step.handoffs().get(0);
            assertThat(h.generated()).containsExactly(step.tokens().get(0).tokenId());
            assertThat(h.prompt()).containsExactly(r.promptTokenIds());
            assertThat(h.states()).containsOnlyKeys(LlamaModel.KV, LlamaModel.ROPE);
            PublishedKVInfo kv = model.resources().kv().codec().decode(h.states().get(LlamaModel.KV));
            assertThat(kv.forRank(0)).allSatisfy((label, s) -> {
                assertThat(s.seqLen()).isEqualTo(10);
                assertThat(s.carried().numPages()).isEqualTo(3);
            });
            assertThat(new PublishedPositionCodec().decode(h.states().get(LlamaModel.ROPE)).counters())
                    .containsValue(10);
            assertThat(prefill.hasWork()).isFalse();
            assertThat(prefill.stats().running()).isZero();
        }
    }

    @Test
    void theDecodeSideCopiesOnlyTheTailItsPrefixCacheLacks() {
        Random rnd = new Random(23);
        int[] first = RandomModels.prompt(rnd, 14); // ends inside its 4th page
        int[] second = concat(java.util.Arrays.copyOf(first, 12), RandomModels.prompt(rnd, 6)); // 3 shared pages
        List<GenerationRequest> requests = List.of(greedy("first", first), sampled("second", second, 5));
        Map<String, List<Integer>> expected = colocated(requests);
        try (LlamaEngine prefill = RandomModels.engine(model, options(64, EngineRole.PREFILL));
             LlamaEngine decode = RandomModels.engine(decodeModel, options(64, EngineRole.DECODE))) {
            Collected c = disaggregated(prefill, decode, requests.subList(0, 1));
            long firstBytes = decode.handoffBytesCopied();
            assertThat(c.finished.get("first").cachedPromptTokens()).isZero();
            Collected c2 = disaggregated(prefill, decode, requests.subList(1, 2));
            long pageBytes = firstBytes / 4; // the first prompt's 14 tokens sit on 4 pages
            // 18 tokens on 5 pages, 3 of them already in the decode side's cache
            assertThat(c2.finished.get("second").cachedPromptTokens()).isEqualTo(12);
            assertThat(decode.handoffBytesCopied() - firstBytes).isEqualTo(2 * pageBytes);
            assertThat(c.sequences().get("first")).isEqualTo(expected.get("first"));
            assertThat(c2.sequences().get("second")).isEqualTo(expected.get("second"));
        }
    }

    @Test
    void aPromptEndingInsideAPageLeavesAllItsWholePagesInThePrefixCache() {
        Random rnd = new Random(29);
        int[] first = RandomModels.prompt(rnd, 14);
        int[] second = concat(java.util.Arrays.copyOf(first, 12), RandomModels.prompt(rnd, 5));
        try (LlamaEngine engine = RandomModels.engine(model, options(64, EngineRole.COLOCATED))) {
            Collected c = new Collected();
            for (GenerationRequest r : List.of(greedy("first", first), greedy("second", second))) {
                engine.submit(r);
                while (engine.hasWork()) {
                    c.add(engine.step());
                }
            }
            assertThat(c.finished.get("second").cachedPromptTokens()).isEqualTo(12);
        }
    }

    @Test
    void aDecodeEngineIgnoresARepeatedHandoffAndOtherRolesRefuseOne() {
        GenerationRequest r = greedy("r", RandomModels.prompt(new Random(4), 9));
        try (LlamaEngine prefill = RandomModels.engine(model, options(64, EngineRole.PREFILL));
             LlamaEngine decode = RandomModels.engine(decodeModel, options(64, EngineRole.DECODE));
) {
            prefill.submit(r);
            PrefillHandoff h = prefill.step().handoffs().get(0);
            decode.receive(r, h);
            decode.receive(r, h);
            Collected c = new Collected();
            while (decode.hasWork()) {
                c.add(decode.step());
            }
            assertThat(c.tokens.get("r")).containsOnlyKeys(1, 2, 3, 4, 5, 6, 7, 8); // each once (Collected checks)
            assertThatThrownBy(() -> prefill.receive(r, h)).isInstanceOf(UnsupportedOperationException.class);
            GenerationRequest other = greedy("other", RandomModels.prompt(new Random(6), 9));
            PrefillHandoff noToken = new PrefillHandoff("other", other.promptTokenIds(), new int[0], h.states());
            assertThatThrownBy(() -> decode.receive(other, noToken)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("0 generated tokens");
            PrefillHandoff shorter = new PrefillHandoff("other", java.util.Arrays.copyOf(other.promptTokenIds(), 8),
                    new int[] {5}, h.states());
            assertThatThrownBy(() -> decode.receive(other, shorter)).hasMessageContaining("stores 9 tokens of a 8-token");
            assertThat(decode.hasWork()).isFalse();
        }
        try (LlamaEngine colocated = RandomModels.engine(model, options(64, EngineRole.COLOCATED))) {
            PrefillHandoff none = new PrefillHandoff("r", r.promptTokenIds(), new int[] {5}, Map.of());
            assertThatThrownBy(() -> colocated.receive(r, none)).isInstanceOf(UnsupportedOperationException.class);
        }
    }
}
