package org.mstar.device.cuda.harness;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.device.cuda.CudaEvent;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.LlamaEngine;
import org.mstar.engine.PreplanCounts;
import org.mstar.engine.StepResult;
import org.mstar.engine.StepTimings;
import org.mstar.engine.StepTimings.Phase;
import org.mstar.model.GenerationConfig;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.llama.RandomWeights;

/**
 * What planning decode step N+1 while the GPU runs step N ({@link EngineOptions#preplan()}) hides: the bf16 engine
 * with decode graphs on random weights made on the device, per case {@code batch} random prompts of
 * {@value #CONTEXT} tokens, prefilled, {@value #WARMUP_STEPS} decode steps, then {@value #TIMED_STEPS} timed steps
 * in which every request decodes; the same cases with pre-planning off and on, in one process, each on an engine of
 * its own.
 *
 * <p>Per step: wall time around {@code step()}; the engine's host time by phase ({@link StepTimings}); and, from
 * CUDA events recorded on the stream where a step's forward is about to be launched, after its pre-plan and where
 * its tokens are on the host, the time to the end of the forward (or of the pre-plan, when the host is slower), the
 * span from launch to tokens and the GPU idle gap (tokens of step N on the host to the launch of step N+1: the
 * stream is empty in between). Pre-planning moves the next step's admit and plan out of the gap into the
 * span, where it overlaps the GPU's work.
 */
final class PreplanBench {
    static final int CONTEXT = 512;
    static final int TOKEN_BUDGET = 8192;
    static final int WARMUP_STEPS = 3;
    static final int TIMED_STEPS = 24;
    private static final int PAGE = 16;

    /**
     * One measured case.
     *
     * @param host     mean host milliseconds per step by phase
     * @param gapMillis (this and the next two NaN for {@link Setting#LAUNCH_AHEAD}, whose phases interleave two
     *                  steps) mean GPU idle gap per step (tokens of the step before on the host to this step's launch)
     * @param forwardMillis mean time from a step's launch to the end of its forward on the GPU, or of the host's
     *                      pre-plan when that ends later (an event recorded after the pre-plan completes with both)
     * @param spanMillis mean time from a step's launch to its tokens on the host
     * @param counts   pre-planned steps over the timed steps: staged, promoted, dropped
     * @param launchedAhead steps over the timed steps launched before the step before them was accepted
     * @param gc       the JVM's collections over the timed steps: a pause lands in whichever phase it interrupts
     */
    record Row(String model, int batch, Setting setting, double millisPerStep, Map<Phase, Double> host,
               double gapMillis, double forwardMillis, double spanMillis, PreplanCounts counts, long launchedAhead,
               GcPauses gc) {
        double hostMillisOutsideWait() {
            return host.entrySet().stream().filter(e -> e.getKey() != Phase.WAIT).mapToDouble(Map.Entry::getValue).sum();
        }
    }

    /** Collections and their total milliseconds, from the JVM's collector beans. */
    record GcPauses(long count, long millis) {
        static GcPauses now() {
            long count = 0;
            long millis = 0;
            for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
                count += Math.max(0, b.getCollectionCount());
                millis += Math.max(0, b.getCollectionTime());
            }
            return new GcPauses(count, millis);
        }

        GcPauses since(GcPauses before) {
            return new GcPauses(count - before.count, millis - before.millis);
        }
    }

    /** The engine settings compared. */
    enum Setting {
        OFF("off"), PREPLAN("on"), LAUNCH_AHEAD("on, launched ahead");

        final String label;

        Setting(String label) {
            this.label = label;
        }
    }

    static final String TITLE = "Pre-planned decode steps (bf16, random weights, decode graphs, " + CONTEXT
            + "-token prompts, " + TIMED_STEPS + " timed steps)";
    private static final int[] BATCHES = {1, 16, 64, 256};

    private final CudaDevice device;
    private final long seed;
    private int runs;

    PreplanBench(CudaDevice device, long seed) {
        this.device = device;
        this.seed = seed;
    }

    /** Every batch on random weights of {@code config}, pre-planning off then on; named {@code name} in the rows. */
    List<Row> run(String name, ModelConfig config, int[] batches) {
        int maxBatch = java.util.Arrays.stream(batches).max().orElseThrow();
        int maxSeqLen = CONTEXT + maxTokens(maxBatch);
        int pages = maxBatch * ((maxSeqLen + PAGE - 1) / PAGE) + PAGE;
        EngineOptions options = new EngineOptions(maxBatch, TOKEN_BUDGET, KvCacheOptions.builder()
                .maxSeqLen(maxSeqLen).maxNumPages(pages).pageSize(PAGE).prefixCache(false).build())
                .withDecodeGraphs(true);
        List<Row> rows = new ArrayList<>();
        LlamaWeights weights = RandomWeights.create(config, device, DType.BF16, seed);
        try (LlamaModel model = new LlamaModel(weights, DType.BF16, "random:" + seed)) {
            for (Setting setting : Setting.values()) {
                try (LlamaEngine engine = new LlamaEngine(model, null, GenerationConfig.of(config), options
                        .withPreplan(setting != Setting.OFF).withLaunchAhead(setting == Setting.LAUNCH_AHEAD),
                        DType.BF16)) {
                    for (int batch : batches) {
                        Row row = measure(engine, name, config, batch, setting);
                        System.out.printf(Locale.ROOT, "preplan bench: %s, batch %d, pre-plan %s: %.2f ms/step, "
                                + "host %.3f ms outside the wait, GPU idle gap %.3f ms%n", name, batch,
                                setting.label, row.millisPerStep, row.hostMillisOutsideWait(), row.gapMillis);
                        rows.add(row);
                    }
                }
            }
        }
        return rows;
    }

    /** The table of Llama-3.2-1B's and Llama-3.1-8B's geometries at batches 1, 16, 64 and 256. */
    static String tables(CudaDevice device, long seed) {
        PreplanBench bench = new PreplanBench(device, seed);
        List<Row> rows = new ArrayList<>(bench.run("Llama-3.2-1B", DecodeBench.llama32_1b(), BATCHES));
        rows.addAll(bench.run("Llama-3.1-8B", EngineBench.llama3_8b(), BATCHES));
        return table(rows);
    }

    /** Tokens each request may generate: through the warm-up and timed steps after its prefill. */
    private static int maxTokens(int batch) {
        return BenchRequests.decodeAllowance(batch, CONTEXT, TOKEN_BUDGET, WARMUP_STEPS + TIMED_STEPS);
    }

    private Row measure(LlamaEngine engine, String name, ModelConfig config, int batch, Setting setting) {
        Random rnd = new Random(seed + batch * 31L);
        runs++;
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < batch; i++) {
            String id = "preplan" + runs + "-" + i;
            ids.add(id);
            engine.submit(BenchRequests.greedy(id, BenchRequests.randomPrompt(rnd, config, CONTEXT), maxTokens(batch)));
        }
        Set<String> started = new HashSet<>();
        while (started.size() < batch) {
            step(engine, -1).tokens().forEach(t -> started.add(t.requestId()));
        }
        for (int i = 0; i < WARMUP_STEPS; i++) {
            step(engine, batch);
        }
        PreplanCounts before = engine.preplanCounts();
        long aheadBefore = engine.launchedAhead();
        boolean events = setting != Setting.LAUNCH_AHEAD;
        StepTimings timings = engine.stepTimings();
        timings.reset();
        // made before the timed steps, so that the steps only record them
        List<CudaEvent> launches = events();
        List<CudaEvent> forwards = events();
        List<CudaEvent> tokens = events();
        int[] recorded = new int[3];
        try {
            timings.listen(!events ? null : phase -> {
                if (phase == Phase.ADMIT_PLAN) {
                    launches.get(recorded[0]++).record(device.stream());
                } else if (phase == Phase.PREPLAN) {
                    forwards.get(recorded[1]++).record(device.stream());
                } else if (phase == Phase.WAIT) {
                    tokens.get(recorded[2]++).record(device.stream());
                }
            });
            GcPauses gcBefore = GcPauses.now();
            long start = System.nanoTime();
            for (int i = 0; i < TIMED_STEPS; i++) {
                step(engine, batch);
            }
            double millis = (System.nanoTime() - start) / 1e6 / TIMED_STEPS;
            GcPauses gc = GcPauses.now().since(gcBefore);
            timings.listen(null);
            double gap = events ? 0 : Double.NaN;
            double forward = events ? 0 : Double.NaN;
            double span = events ? 0 : Double.NaN;
            for (int i = 0; events && i < TIMED_STEPS; i++) {
                forward += forwards.get(i).millisSince(launches.get(i));
                span += tokens.get(i).millisSince(launches.get(i));
                if (i > 0) {
                    gap += launches.get(i).millisSince(tokens.get(i - 1));
                }
            }
            PreplanCounts after = engine.preplanCounts();
            PreplanCounts timed = new PreplanCounts(after.staged() - before.staged(),
                    after.promoted() - before.promoted(), after.dropped() - before.dropped());
            return new Row(name, batch, setting, millis, timings.millisPerStep(), gap / (TIMED_STEPS - 1),
                    forward / TIMED_STEPS, span / TIMED_STEPS, timed, engine.launchedAhead() - aheadBefore, gc);
        } finally {
            timings.listen(null);
            launches.forEach(CudaEvent::close);
            forwards.forEach(CudaEvent::close);
            tokens.forEach(CudaEvent::close);
            ids.forEach(engine::remove);
        }
    }

    private static List<CudaEvent> events() {
        List<CudaEvent> events = new ArrayList<>(TIMED_STEPS);
        for (int i = 0; i < TIMED_STEPS; i++) {
            events.add(new CudaEvent());
        }
        return events;
    }

    /** Steps once; fails on a request failure, or when {@code expected} ≥ 0 tokens were not all produced. */
    private static StepResult step(LlamaEngine engine, int expected) {
        StepResult r = BenchRequests.step(engine);
        if (expected >= 0 && r.tokens().size() != expected) {
            throw new IllegalStateException("decode step produced " + r.tokens().size() + " tokens for a batch of "
                    + expected);
        }
        return r;
    }

    /** The markdown table: per case and setting, wall and host time per step by phase, and the GPU's gap. */
    static String table(List<Row> rows) {
        StringBuilder sb = new StringBuilder();
        sb.append("| model | batch | pre-plan | ms/step | schedule | admit+plan | launch | commit | pre-plan (host) "
                + "| wait | accept | host ms outside wait | launch to forward done ms | launch to tokens ms "
                + "| GPU idle gap ms | staged / promoted / dropped | launched ahead | GC: collections, ms |\n");
        sb.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            Map<Phase, Double> h = r.host;
            sb.append(String.format(Locale.ROOT, "| %s | %d | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f "
                            + "| %.3f | %.3f | %s | %s | %s | %d / %d / %d | %d | %d, %d |%n", r.model, r.batch,
                    r.setting.label, r.millisPerStep, h.get(Phase.SCHEDULE), h.get(Phase.ADMIT_PLAN),
                    h.get(Phase.LAUNCH), h.get(Phase.COMMIT), h.get(Phase.PREPLAN), h.get(Phase.WAIT),
                    h.get(Phase.ACCEPT), r.hostMillisOutsideWait(), millis(r.forwardMillis), millis(r.spanMillis),
                    millis(r.gapMillis), r.counts.staged(), r.counts.promoted(), r.counts.dropped(), r.launchedAhead,
                    r.gc.count(), r.gc.millis()));
        }
        sb.append("\nHost columns are ms per step by engine phase; commit (what the enqueued forward consumed) and "
                + "pre-plan (host: planning the next step) run while the GPU runs this one, overlapped with the wait; "
                + "accept runs once the tokens are on the host. CUDA events: where a step's forward is about to be "
                + "launched, after its pre-plan (done when both the forward and the pre-plan are: a launch to forward "
                + "done above the forward's own time means the pre-plan was not hidden), and where its tokens are on "
                + "the host; the GPU idle gap runs from a step's tokens on the host to the next step's launch. GC: the "
                + "JVM's collections during the timed steps (a pause adds to the phase it interrupts). Launched ahead, "
                + "a step's forward is enqueued before the step before it is accepted (its draw, commit and pre-plan "
                + "after), so one step()'s phases belong to two steps and the event columns are left out (-).\n");
        return sb.toString();
    }

    private static String millis(double ms) {
        return Double.isNaN(ms) ? "-" : String.format(Locale.ROOT, "%.3f", ms);
    }
}
