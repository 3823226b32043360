package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.kv.KvShelf;

/**
 * A prefill and a decode engine on one device handing off by handle ({@link LlamaEngine#lendOnDevice}): the decode
 * side copies the lent pages pool to pool, no KV byte goes through the host or the hand-off's bytes, and the tokens
 * are the colocated engine's, also when the lent pages are gone before they were copied (the decode side
 * recomputes) and when either engine is replaced midway (a failover).
 */
class SameDeviceHandoffTest {
    private static final int PAGE = 4;

    @TempDir
    static Path dir;
    static CpuDevice cpu;
    static LlamaModel model;
    static LlamaModel prefillModel;
    static LlamaModel decodeModel;

    @BeforeAll
    static void load() throws Exception {
        cpu = new CpuDevice(2);
        model = RandomModels.load(RandomModels.llama(), 3, dir, cpu);
        prefillModel = new LlamaModel(model.weights(), DType.F32, "random:3");
        decodeModel = new LlamaModel(model.weights(), DType.F32, "random:3");
    }

    @AfterAll
    static void close() {
        model.close();
        cpu.close();
    }

    static EngineOptions options(int budget, int pages, EngineRole role) {
        return RandomModels.options(8, budget, pages, PAGE, 0).withRole(role);
    }

    static List<GenerationRequest> workload(long seed, int n) {
        Random rnd = new Random(seed);
        int[] shared = RandomModels.prompt(rnd, 9);
        List<GenerationRequest> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int[] prompt = i % 3 == 0 ? concat(shared, RandomModels.prompt(rnd, 1 + rnd.nextInt(6)))
                    : RandomModels.prompt(rnd, 2 + rnd.nextInt(20));
            SamplingReqConfig sampling = i % 2 == 0 ? SamplingReqConfig.DEFAULTS
                    : SamplingReqConfig.DEFAULTS.withTemperature(0.9).withSeed(100 + i);
            out.add(GenerationRequest.builder("r" + i).promptTokenIds(prompt).sampling(sampling)
                    .maxTokens(1 + rnd.nextInt(8)).ignoreEos(true).build());
        }
        return out;
    }

    private static int[] concat(int[] a, int[] b) {
        int[] out = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    static Map<String, List<Integer>> colocated(LlamaModel model, List<GenerationRequest> requests) {
        try (LlamaEngine engine = RandomModels.engine(model, options(64, 200, EngineRole.COLOCATED))) {
            Tokens t = new Tokens();
            requests.forEach(engine::submit);
            for (int i = 0; engine.hasWork(); i++) {
                assertThat(i).isLessThan(1_000);
                t.add(engine.step());
            }
            return t.sequences();
        }
    }

    /** Tokens per request by index; a token emitted twice at one index must be the same token. */
    static final class Tokens {
        final Map<String, Map<Integer, Integer>> byIndex = new HashMap<>();
        final List<RequestFailure> failures = new ArrayList<>();

        void add(StepResult r) {
            for (TokenOutput t : r.tokens()) {
                Integer before = byIndex.computeIfAbsent(t.requestId(), k -> new HashMap<>()).put(t.index(), t.tokenId());
                assertThat(before == null || before == t.tokenId()).as("token %d of %s", t.index(), t.requestId())
                        .isTrue();
            }
            failures.addAll(r.failures());
        }

        Map<String, List<Integer>> sequences() {
            assertThat(failures).isEmpty();
            Map<String, List<Integer>> out = new HashMap<>();
            byIndex.forEach((rid, m) -> {
                List<Integer> seq = new ArrayList<>();
                for (int i = 0; i < m.size(); i++) {
                    assertThat(m).as("token %d of %s", i, rid).containsKey(i);
                    seq.add(m.get(i));
                }
                out.put(rid, seq);
            });
            return out;
        }
    }

    static LlamaEngine lending(LlamaModel m, EngineOptions options, KvShelf shelf) {
        LlamaEngine e = RandomModels.engine(m, options);
        e.lendOnDevice(shelf);
        return e;
    }

    /**
     * Submits {@code requests} to {@code prefill} and steps both engines until both are done, each hand-off given to
     * {@code decode} as {@code onTheWay} makes it, the pages of {@code models} conserved after every step.
     */
    static Tokens handOff(LlamaEngine prefill, LlamaEngine decode, List<GenerationRequest> requests,
                          UnaryOperator<PrefillHandoff> onTheWay, LlamaModel... models) {
        Map<String, GenerationRequest> byId = new HashMap<>();
        requests.forEach(r -> byId.put(r.requestId(), r));
        Tokens t = new Tokens();
        requests.forEach(prefill::submit);
        for (int i = 0; prefill.hasWork() || decode.hasWork(); i++) {
            assertThat(i).isLessThan(2_000);
            StepResult p = prefill.step();
            t.add(p);
            for (PrefillHandoff h : p.handoffs()) {
                decode.receive(byId.get(h.requestId()), onTheWay.apply(h));
            }
            t.add(decode.step());
            for (LlamaModel m : models) {
                m.resources().kv().assertPagesConserved();
            }
        }
        return t;
    }

    @Test
    void aHandleHandOffCopiesNoKvThroughTheHostAndGeneratesTheColocatedTokens() {
        List<GenerationRequest> requests = workload(5, 9);
        Map<String, List<Integer>> expected = colocated(model, requests);
        KvShelf shelf = new KvShelf();
        try (LlamaEngine prefill = lending(prefillModel, options(8, 200, EngineRole.PREFILL), shelf);
             LlamaEngine decode = lending(decodeModel, options(64, 200, EngineRole.DECODE), shelf)) {
            long[] stateBytes = {0};
            int[] handoffs = {0};
            Tokens t = handOff(prefill, decode, requests, h -> {
                stateBytes[0] = Math.max(stateBytes[0], h.states().get(LlamaModel.KV).remaining());
                handoffs[0]++;
                return h;
            }, prefillModel, decodeModel);
            assertThat(t.sequences()).isEqualTo(expected);
            assertThat(handoffs[0]).isEqualTo(requests.size());
            assertThat(decode.handoffBytesCopied()).as("KV bytes through the host").isZero();
            assertThat(decode.handoffLentBytesCopied()).as("KV bytes copied on the device").isPositive();
            assertThat(stateBytes[0]).as("largest KV state in a hand-off: a ticket, no pages").isLessThan(200);
            assertThat(prefillModel.resources().kv().lentHandoffs()).isZero();
            assertThat(shelf.outstanding()).isZero();
        }
    }

    @Test
    void aHandOffDroppedBeforeItsImportGivesItsPagesBack() {
        List<GenerationRequest> requests = workload(3, 2);
        KvShelf shelf = new KvShelf();
        try (LlamaEngine prefill = lending(prefillModel, options(64, 200, EngineRole.PREFILL), shelf)) {
            LlamaEngine decode = lending(decodeModel, options(64, 200, EngineRole.DECODE), shelf);
            requests.forEach(prefill::submit);
            List<PrefillHandoff> handoffs = new ArrayList<>();
            while (prefill.hasWork()) {
                handoffs.addAll(prefill.step().handoffs());
            }
            assertThat(prefillModel.resources().kv().lentHandoffs()).isEqualTo(2);
            decode.receive(requests.get(0), handoffs.get(0));
            decode.receive(requests.get(0), handoffs.get(0)); // a duplicate of a request the decode side holds
            decode.remove(requests.get(0).requestId());
            assertThat(prefillModel.resources().kv().lentHandoffs()).isEqualTo(1);
            decode.receive(requests.get(1), handoffs.get(1));
            decode.close();
            assertThat(prefillModel.resources().kv().lentHandoffs()).isZero();
            assertThat(shelf.outstanding()).isZero();
            prefillModel.resources().kv().assertPagesConserved();
        }
    }

    @Test
    void aDecodeEngineOfAnotherShelfRecomputesAndGeneratesTheColocatedTokens() {
        List<GenerationRequest> requests = workload(7, 5);
        Map<String, List<Integer>> expected = colocated(model, requests);
        KvShelf here = new KvShelf();
        try (LlamaEngine prefill = lending(prefillModel, options(8, 200, EngineRole.PREFILL), here);
             LlamaEngine decode = lending(decodeModel, options(64, 200, EngineRole.DECODE), new KvShelf())) {
            assertThat(handOff(prefill, decode, requests, h -> h).sequences()).isEqualTo(expected);
            assertThat(decode.handoffLentBytesCopied() + decode.handoffBytesCopied()).isZero();
            // never claimed: the prefill side still lends them, until it runs short or closes
            assertThat(prefillModel.resources().kv().lentHandoffs()).isEqualTo(requests.size());
            prefillModel.resources().kv().assertPagesConserved();
        }
        assertThat(here.outstanding()).isZero();
    }
}
