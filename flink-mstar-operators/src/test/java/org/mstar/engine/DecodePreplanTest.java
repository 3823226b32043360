package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.constraint.OutputConstraint;
import org.mstar.resources.kv.KVManager;

/**
 * Planning decode step N+1 while step N runs, and launching it before step N's tokens are accepted, changes no
 * token: the same workloads give the same tokens, finishes and failures with pre-planning off, on, and on with
 * launching ahead, whether the staged step is promoted or goes stale (a request stops on
 * a stop token or by length, another arrives mid-decode, one is preempted or offloaded, a prompt hits the prefix
 * cache, sampling is random and seeded, output is constrained), and a dropped stage leaks no KV page. While a step
 * launched ahead is in flight, a request removed then submitted again under the same id starts afresh, and a request
 * whose step launched ahead throws fails alone. Decode graphs are on throughout:
 * on the CPU a replay re-runs the recorded forward, so the leased path is the one exercised.
 */
class DecodePreplanTest {
    @TempDir
    static Path dir;
    private static CpuDevice cpu;
    private static LlamaModel model;

    @BeforeAll
    static void load() throws IOException {
        cpu = new CpuDevice(2);
        model = RandomModels.load(RandomModels.llama(), 5, dir, cpu);
    }

    @AfterAll
    static void close() {
        model.close();
        cpu.close();
    }

    /** {@code request}, submitted before the step numbered {@code step} (0: the first). */
    record Arrival(int step, GenerationRequest request) {}

    /** What one engine made of a workload. */
    record Served(EngineDriver driver, PreplanCounts counts, EngineStats stats, long replays, long timedSteps,
                  long reusedDeclarations, long launchedAhead) {
        Map<String, FinishReason> finishes() {
            Map<String, FinishReason> m = new TreeMap<>();
            driver.finished.forEach((id, f) -> m.put(id, f.finish()));
            return m;
        }

        List<String> failed() {
            return driver.failures.stream().map(RequestFailure::requestId).sorted().toList();
        }
    }

    /**
     * Runs {@code arrivals} on a fresh engine of {@code model} until every request is done, then checks that the KV
     * pages are conserved and every page is free or only cached.
     */
    static Served serve(LlamaModel model, EngineOptions options, List<Arrival> arrivals) {
        try (LlamaEngine engine = RandomModels.engine(model, options)) {
            EngineDriver driver = new EngineDriver();
            List<Arrival> queue = new ArrayList<>(arrivals);
            queue.sort(Comparator.comparingInt(Arrival::step));
            int step = 0;
            while (!queue.isEmpty() || engine.hasWork()) {
                while (!queue.isEmpty() && queue.get(0).step() <= step) {
                    engine.submit(queue.remove(0).request());
                }
                driver.collect(engine.step());
                if (++step > 5000) {
                    throw new AssertionError("engine still busy after 5000 steps");
                }
            }
            KVManager kv = model.resources().kv();
            kv.assertPagesConserved();
            assertThat(kv.availablePages()).as("pages free or only cached once every request is done")
                    .isEqualTo(options.kvCache().maxNumPages() - 1);
            return new Served(driver, engine.preplanCounts(), engine.stats(), engine.decodeGraphReplays(),
                    engine.stepTimings().steps(), engine.reusedDeclarations(), engine.launchedAhead());
        }
    }

    /**
     * Serves {@code arrivals} with pre-planning off, on without launching ahead and on with it, checks that all three
     * gave the same outputs, and returns the last.
     */
    static Served onMatchesOff(LlamaModel model, EngineOptions options, List<Arrival> arrivals) {
        EngineOptions graphs = options.withDecodeGraphs(true);
        Served off = serve(model, graphs.withPreplan(false), arrivals);
        Served staged = serve(model, graphs.withPreplan(true).withLaunchAhead(false), arrivals);
        Served on = serve(model, graphs.withPreplan(true).withLaunchAhead(true), arrivals);
        assertThat(off.counts()).isEqualTo(PreplanCounts.NONE);
        assertThat(off.launchedAhead() + staged.launchedAhead()).isZero();
        for (Served s : List.of(staged, on)) {
            assertThat(s.failed()).isEqualTo(off.failed());
            assertThat(s.driver().tokens).isEqualTo(off.driver().tokens);
            assertThat(s.finishes()).isEqualTo(off.finishes());
            assertThat(s.counts().staged()).as("every staged step promoted or dropped")
                    .isEqualTo(s.counts().promoted() + s.counts().dropped());
            assertThat(s.reusedDeclarations()).as("only a promoted step reuses the staged declaration")
                    .isLessThanOrEqualTo(s.counts().promoted());
        }
        assertThat(on.launchedAhead()).as("only a promoted step launches ahead")
                .isLessThanOrEqualTo(on.counts().promoted());
        return on;
    }

    static GenerationRequest request(String id, int[] prompt, SamplingReqConfig sampling, int maxTokens,
                                     List<Integer> stopIds) {
        return GenerationRequest.builder(id).promptTokenIds(prompt).sampling(sampling).maxTokens(maxTokens)
                .stopTokenIds(stopIds).ignoreEos(true).build();
    }

    @Test
    void aSteadyDecodePromotesEveryStagedStep() {
        Random rnd = new Random(1);
        List<Arrival> arrivals = IntStream.range(0, 4).mapToObj(i -> new Arrival(0,
                request("r" + i, RandomModels.prompt(rnd, 5 + i), SamplingReqConfig.greedy(), 8, List.of()))).toList();

        Served on = onMatchesOff(model, RandomModels.options(4, 64, 64, 4, 0), arrivals);

        // one prefill step, then 7 replayed decode steps; each but the last (where every request ends by length)
        // stages its successor, which the scheduler then picks
        assertThat(on.replays()).isEqualTo(7);
        assertThat(on.counts()).isEqualTo(new PreplanCounts(6, 6, 0));
        assertThat(on.reusedDeclarations()).as("each promoted step took the staged declaration").isEqualTo(6);
        assertThat(on.launchedAhead()).as("each promoted step launched before its predecessor's accept").isEqualTo(6);
        assertThat(on.timedSteps()).isEqualTo(8);
    }

    @Test
    void aFullBatchLaunchesAheadWhileLaterRequestsWaitForARow() {
        Random rnd = new Random(4);
        List<Arrival> arrivals = IntStream.range(0, 8).mapToObj(i -> new Arrival(0,
                request("r" + i, RandomModels.prompt(rnd, 5 + i), SamplingReqConfig.greedy(), 8, List.of()))).toList();

        Served on = onMatchesOff(model, RandomModels.options(4, 64, 64, 4, 0), arrivals);

        // two waves of four rows: a prefill step, then 7 decode steps of which 6 were staged and launched ahead,
        // the first wave's with the second's requests waiting behind it
        assertThat(on.counts()).isEqualTo(new PreplanCounts(12, 12, 0));
        assertThat(on.launchedAhead()).isEqualTo(12);
    }

    @Test
    void stalePreplansAreDroppedWithoutChangingAToken() {
        Random rnd = new Random(2);
        int[] shared = RandomModels.prompt(rnd, 12);
        // stop ids a random model draws within a few tokens, so requests stop before their length
        List<Integer> stopIds = IntStream.range(0, 40).map(i -> 2 + rnd.nextInt(RandomModels.VOCAB - 2)).boxed().toList();
        List<Arrival> arrivals = new ArrayList<>();
        for (int i = 0; i < 9; i++) {
            int[] prompt = i % 3 == 0 ? EngineEquivalenceTest.concat(shared, RandomModels.prompt(rnd, 2 + i))
                    : RandomModels.prompt(rnd, 3 + 2 * i);
            SamplingReqConfig sampling = SamplingReqConfig.DEFAULTS.withTemperature(0.8).withSeed(100 + i);
            arrivals.add(new Arrival(i < 5 ? 0 : 3 * i - 10,
                    request("r" + i, prompt, sampling, 4 + 3 * (i % 4), i % 2 == 0 ? stopIds : List.of())));
        }

        Served on = onMatchesOff(model, RandomModels.options(8, 48, 128, 4, 0), arrivals);

        assertThat(on.finishes()).containsValues(FinishReason.STOP, FinishReason.LENGTH);
        assertThat(on.stats().prefixHitTokens()).as("prefix-cache hits").isPositive();
        assertThat(on.counts().promoted()).isPositive();
        assertThat(on.counts().dropped()).isPositive();
    }

    @Test
    void constrainedRequestsStoppingOnCompletionGetTheSameTokens(@TempDir Path modelDir) throws IOException {
        Path written = StructuredOutputModel.write(modelDir, 5);
        Map<Boolean, Map<String, List<Integer>>> tokens = new HashMap<>();
        for (boolean preplan : new boolean[] {false, true}) {
            // with pre-planning, constrained rows' steps launch ahead too: their masks are read at the draw
            EngineOptions options = new EngineOptions(4, 4096, KvCacheOptions.builder().maxSeqLen(2048)
                    .maxNumPages(4 * 128 + 2).build())
                    .withDecodeGraphs(true).withPreplan(preplan);
            try (LlamaEngine engine = LlamaEngineLoader.load(written, cpu, options)) {
                for (int seed = 0; seed < 4; seed++) {
                    engine.submit(StructuredOutputModel.request("c" + seed, "Say:", 1.0, seed, 60,
                            OutputConstraint.regex("[A-Z][a-z]{1,8}( [A-Z][a-z]{1,8}){0,2}")));
                }
                EngineDriver driver = new EngineDriver();
                driver.drain(engine, 1000);
                assertThat(driver.failures).isEmpty();
                assertThat(driver.finished.values()).allMatch(f -> f.finish() == FinishReason.STOP);
                tokens.put(preplan, driver.tokens);
                assertThat(engine.preplanCounts().promoted() > 0).isEqualTo(preplan);
                assertThat(engine.launchedAhead() > 0).isEqualTo(preplan);
            }
        }
        assertThat(tokens.get(true)).isEqualTo(tokens.get(false));
    }

    @ParameterizedTest(name = "offload pages {0}")
    @ValueSource(ints = {0, 64})
    void preemptionUnderATightPoolChangesNoToken(int offloadPages) {
        Random rnd = new Random(3);
        List<Arrival> arrivals = IntStream.range(0, 6).mapToObj(i -> new Arrival(2 * i,
                request("p" + i, RandomModels.prompt(rnd, 6 + 3 * i),
                        SamplingReqConfig.DEFAULTS.withTemperature(0.7).withSeed(i), 9, List.of()))).toList();

        // 4 rows, 16 tokens a step, pages of 4 tokens, 13 usable pages: requests get preempted
        Served on = onMatchesOff(model, RandomModels.options(4, 16, 14, 4, offloadPages), arrivals);

        assertThat(on.stats().preemptions()).as("preemptions").isPositive();
        assertThat(on.counts().promoted()).isPositive();
    }

    // ---------------------------------------------------------------- between two steps, a step in flight

    private static EngineOptions aheadOptions() {
        return RandomModels.options(4, 64, 64, 4, 0).withDecodeGraphs(true).withPreplan(true).withLaunchAhead(true);
    }

    private static List<GenerationRequest> threeRandomRequests() {
        Random rnd = new Random(11);
        List<GenerationRequest> out = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            out.add(request("r" + i, RandomModels.prompt(rnd, 4 + 3 * i),
                    SamplingReqConfig.DEFAULTS.withTemperature(0.9).withSeed(40 + i), 10, List.of()));
        }
        return out;
    }

    private static EngineDriver servedAlone(List<GenerationRequest> requests) {
        try (LlamaEngine engine = RandomModels.engine(model, aheadOptions())) {
            requests.forEach(engine::submit);
            EngineDriver d = new EngineDriver();
            d.drain(engine, 500);
            return d;
        }
    }

    @Test
    void aRequestRemovedAndSubmittedAgainWhileAStepIsInFlightStartsAfresh() {
        List<GenerationRequest> requests = threeRandomRequests();
        EngineDriver clean = servedAlone(requests);
        try (LlamaEngine engine = RandomModels.engine(model, aheadOptions())) {
            requests.forEach(engine::submit);
            EngineDriver before = new EngineDriver();
            while (engine.launchedAhead() < 2) {
                before.collect(engine.step());
            }
            // a step holding r1's row is on the device, its tokens not accepted
            engine.remove("r1");
            engine.submit(requests.get(1));
            EngineDriver after = new EngineDriver();
            after.drain(engine, 500);

            assertThat(after.failures).isEmpty();
            assertThat(after.tokens.get("r1")).as("r1 from its second submission").isEqualTo(clean.tokens.get("r1"));
            for (String id : List.of("r0", "r2")) {
                List<Integer> all = new ArrayList<>(before.tokens.get(id));
                all.addAll(after.tokens.get(id));
                assertThat(all).as(id).isEqualTo(clean.tokens.get(id));
            }
            assertThat(engine.hasWork()).isFalse();
            model.resources().kv().assertPagesConserved();
            assertThat(model.resources().kv().availablePages())
                    .isEqualTo(aheadOptions().kvCache().maxNumPages() - 1);
        }
    }

    @Test
    void aRequestWhoseStepLaunchedAheadThrowsFailsAlone() {
        List<GenerationRequest> requests = threeRandomRequests();
        EngineDriver clean = servedAlone(requests);
        try (LlamaEngine engine = RandomModels.engine(model, aheadOptions())) {
            engine.observeLogits((rid, index, logits) -> {
                if (rid.equals("r1") && index == 4) {
                    throw new IllegalStateException("cannot sample this request");
                }
            });
            requests.forEach(engine::submit);
            EngineDriver d = new EngineDriver();
            d.drain(engine, 500);

            assertThat(engine.launchedAhead()).isPositive();
            assertThat(d.failures).singleElement().satisfies(f -> {
                assertThat(f.requestId()).isEqualTo("r1");
                assertThat(f.code()).isEqualTo(500);
            });
            assertThat(d.tokens.get("r1")).isEqualTo(clean.tokens.get("r1").subList(0, 4));
            assertThat(d.tokens.get("r0")).isEqualTo(clean.tokens.get("r0"));
            assertThat(d.tokens.get("r2")).isEqualTo(clean.tokens.get("r2"));
            model.resources().kv().assertPagesConserved();
        }
    }
}
