package org.mstar.jobs;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.stream.IntStream;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.metrics.HistogramStatistics;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.EngineRole;
import org.mstar.flink.DisaggregationOptions;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.GenerateResult;
import org.mstar.schemas.Response;
import org.mstar.schemas.TokenEvent;

/**
 * {@code mstar bench-pipeline --disaggregation}: one mixed load through the colocated job and through the
 * disaggregated job (prefill and decode operators, parallelism 1 + 1, each with its own engine and KV pool). The
 * load: {@code --decoders} requests with short prompts and long outputs sent at once, then {@code --long-prompts}
 * long prompts sent one by one while they decode. The point of disaggregation is what the long prompts' prefills
 * do to the decoders' inter-token latency.
 *
 * <p>With one device every engine shares it. With two ({@code --devices}) the colocated job also runs at
 * parallelism 2, one engine per device, and the disaggregated job prefills on the first and decodes on the second.
 * With {@code --failures N} the disaggregated job serves the load once more under EXACTLY_ONCE with N task failures
 * injected in each operator, and its committed outputs are compared with the uninterrupted layouts'.
 *
 * <p>A warm-up job per layout first serves a scaled-down copy of the load (every code path, both engines, the
 * hand-off); then each layout serves the load in a fresh job, whose metrics are read through {@link BenchMetrics},
 * over the same weights. The latencies are the client's: it records when it reads each TokenEvent from Kafka, so
 * they include the trip through the sink and the broker, alike for every layout.
 */
final class DisaggregationBench {
    private static final int PAGE_SIZE = 16;
    private static final long PROMPT_SEED = 11;
    private static final String PREFILL = "mstar prefill";
    private static final String DECODE = "mstar decode";

    private DisaggregationBench() {}

    /** A request and when the client sends it, in ms after the first. */
    private record Arrival(GenerateRequest request, long offsetMillis, boolean decoder) {}

    /** The hand-offs of the measured load, from the operators' metrics (decode side: received and imported). */
    private record Handoffs(long count, long records, long bytes, double meanBytes, double meanLatencyMs,
                            double latencyP50Ms, double latencyP99Ms) {
        /** KV bytes over hand-off latency: the rate of one hand-off end to end. */
        double gbPerSecond() {
            return meanLatencyMs > 0 ? meanBytes / (meanLatencyMs / 1000) / 1e9 : Double.NaN;
        }
    }

    /**
     * Where a job's engines run: one colocated operator at {@code parallelism} over {@code device} (a device list
     * gives subtask i entry i), or prefill and decode operators of parallelism 1 each; {@code failAt} the engine
     * steps of each role at which a task fails.
     */
    private record Layout(String name, boolean split, int parallelism, String device, String prefillDevice,
                          String decodeDevice, Map<EngineRole, Set<Long>> failAt) {
        static Layout colocated(String name, List<String> devices) {
            return new Layout(name, false, devices.size(), String.join(",", devices), null, null, Map.of());
        }

        static Layout disaggregated(String name, String prefillDevice, String decodeDevice) {
            return new Layout(name, true, 1, null, prefillDevice, decodeDevice, Map.of());
        }

        Layout failing(String newName, Map<EngineRole, Set<Long>> steps) {
            return new Layout(newName, split, parallelism, device, prefillDevice, decodeDevice, steps);
        }

        int failures() {
            return failAt.values().stream().mapToInt(Set::size).sum();
        }
    }

    /** One layout's measurement. */
    private record Measured(long tokens, double seconds, List<Double> decoderTtftMs, List<Double> longTtftMs,
                            List<Double> decodeGapsMs, List<Double> operatorItlMs,
                            Map<String, List<Integer>> outputs, Handoffs handoffs) {
        double tokensPerSecond() {
            return tokens / seconds;
        }
    }

    static int run(BenchPipelineCommand flags, Path modelDir, Long seed, ModelConfig config, Path work,
            PrintWriter out, PrintWriter err) throws Exception {
        List<String> devices = flags.devices == null ? List.of(flags.modelFlags.device) : flags.devices;
        if (devices.size() > 2 || devices.stream().anyMatch(d -> d.isBlank() || d.contains(","))) {
            throw new IllegalArgumentException("--devices takes one or two devices, e.g. cuda:0,cuda:1");
        }
        int longest = Math.max(flags.decoderPromptLen + flags.decoderMaxTokens,
                Collections.max(flags.longPromptLens) + flags.longMaxTokens);
        if (longest > config.maxPositionEmbeddings()) {
            throw new IllegalArgumentException("requests of up to " + longest + " tokens exceed the model's "
                    + config.maxPositionEmbeddings() + " positions");
        }
        int maxSeqLen = Math.min(config.maxPositionEmbeddings(), longest + PAGE_SIZE);
        EngineSizeFlags sizes = flags.sizing;
        int budget = sizes.tokenBudget;
        EngineOptions colocated = options(sizes.maxBatchRows, budget, maxSeqLen, sizes.pages, EngineRole.COLOCATED);
        EngineOptions prefill = options(sizes.maxBatchRows,
                flags.prefillTokenBudget == null ? budget : flags.prefillTokenBudget, maxSeqLen,
                flags.prefillPages == null ? sizes.pages : flags.prefillPages, EngineRole.PREFILL);
        EngineOptions decode = options(sizes.maxBatchRows, budget, maxSeqLen,
                flags.decodePages == null ? sizes.pages : flags.decodePages, EngineRole.DECODE);

        Random rnd = new Random(PROMPT_SEED);
        List<Arrival> load = load("mixed", flags, flags.decoderMaxTokens, flags.longMaxTokens, config, rnd);
        // the decoders with a few tokens and one long prompt: every code path (both engines, the hand-off) runs
        // before measuring, without moving gigabytes of KV twice
        List<Arrival> warmUp = load("warm", flags, Math.min(4, flags.decoderMaxTokens),
                Math.min(2, flags.longMaxTokens), config, rnd).stream()
                .filter(a -> a.decoder() || a.request().getRequestId().equals("warm-long-0"))
                .map(a -> new Arrival(a.request(), 0, a.decoder())).toList();

        for (String device : new LinkedHashSet<>(devices)) {
            long start = System.nanoTime();
            BenchModels.Loaded shared = BenchModels.get(modelDir, seed, device);
            err.printf(Locale.ROOT, "%s on %s: weights %s in %.1f s%n", seed == null ? modelDir : "random weights",
                    shared.turn().device().name(), seed == null ? "loaded" : "made", (System.nanoTime() - start) / 1e9);
        }
        err.flush();

        List<Layout> layouts = new ArrayList<>();
        layouts.add(Layout.colocated("colocated", devices.subList(0, 1)));
        if (devices.size() == 2) {
            layouts.add(Layout.colocated("colocated x2", devices));
        }
        String prefillDevice = devices.get(0);
        String decodeDevice = devices.get(devices.size() - 1);
        layouts.add(Layout.disaggregated(flags.sameDeviceHandoff ? "disaggregated, by handle" : "disaggregated",
                prefillDevice, decodeDevice));
        Map<String, Measured> measured = new LinkedHashMap<>();
        Map<EngineRole, Long> disaggregatedSteps = Map.of();
        int eventsBefore;
        try (EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start()) {
            Launcher launcher = new Launcher(broker, flags, work, modelDir, seed, colocated, prefill, decode);
            for (Layout layout : layouts) {
                try (Job warm = launcher.start("warm-up " + layout.name(), layout)) {
                    warm.serve(warmUp, flags.timeoutSeconds);
                }
            }
            for (Layout layout : layouts) {
                Measured m = launcher.measure(layout, load, err);
                measured.put(layout.name(), layout.split() ? withHandoffs(m) : m);
                if (layout.split()) {
                    disaggregatedSteps = BenchEngineFactory.resetSteps();
                }
            }
            eventsBefore = BenchEngineFactory.events().size();
            if (flags.failures > 0) {
                Layout failing = layouts.get(layouts.size() - 1).failing("disaggregated, " + flags.failures
                        + " failures per operator", spreadFailures(disaggregatedSteps, flags.failures));
                measured.put(failing.name(), launcher.measure(failing, load, err));
            }
        }
        out.print(table(flags, devices, measured, load));
        List<String> events = BenchEngineFactory.events();
        events.subList(eventsBefore, events.size()).forEach(e -> out.println("  " + e));
        out.flush();
        return 0;
    }

    /** {@code n} failures per role at steps spread evenly over that role's steps in an uninterrupted run. */
    private static Map<EngineRole, Set<Long>> spreadFailures(Map<EngineRole, Long> steps, int n) {
        Map<EngineRole, Set<Long>> failAt = new LinkedHashMap<>();
        for (EngineRole role : List.of(EngineRole.PREFILL, EngineRole.DECODE)) {
            long total = steps.getOrDefault(role, 0L);
            Set<Long> at = new TreeSet<>();
            for (int i = 1; i <= n; i++) {
                at.add(Math.max(1, total * i / (n + 1)));
            }
            failAt.put(role, at);
        }
        return failAt;
    }

    private static EngineOptions options(int rows, int budget, int maxSeqLen, int pages, EngineRole role) {
        return new EngineOptions(rows, budget, KvCacheOptions.builder().maxSeqLen(maxSeqLen).maxNumPages(pages)
                .pageSize(PAGE_SIZE).build())
                .withRole(role);
    }

    /** The decoders at 0 ms, the long prompts from {@code --long-start} on, {@code --long-interval} apart. */
    private static List<Arrival> load(String prefix, BenchPipelineCommand flags, int decoderTokens, int longTokens,
            ModelConfig config, Random rnd) {
        List<Arrival> arrivals = new ArrayList<>();
        for (int i = 0; i < flags.decoders; i++) {
            arrivals.add(new Arrival(request(prefix + "-decoder-" + i, prompt(rnd, flags.decoderPromptLen, config),
                    decoderTokens), 0, true));
        }
        for (int i = 0; i < flags.longPrompts; i++) {
            int len = flags.longPromptLens.get(i % flags.longPromptLens.size());
            arrivals.add(new Arrival(request(prefix + "-long-" + i, prompt(rnd, len, config), longTokens),
                    flags.longStartMillis + i * flags.longIntervalMillis, false));
        }
        return arrivals;
    }

    /** Greedy, EOS ignored: every run generates the same number of tokens, and the layouts can be compared. */
    private static GenerateRequest request(String id, List<Integer> prompt, int maxTokens) {
        return GenerateRequest.newBuilder()
                .setRequestId(id)
                .setPromptTokenIds(prompt)
                .setMaxTokens(maxTokens)
                .setTemperature(0.0)
                .setIgnoreEos(true)
                .build();
    }

    private static List<Integer> prompt(Random rnd, int length, ModelConfig config) {
        return IntStream.range(0, length).mapToObj(i -> 3 + rnd.nextInt(config.vocabSize() - 3)).toList();
    }

    private static Measured withHandoffs(Measured m) {
        HistogramStatistics sizes = BenchMetrics.histogram(DECODE, "handoffSizeBytes");
        HistogramStatistics latency = BenchMetrics.histogram(DECODE, "handoffLatencyMs");
        long count = BenchMetrics.count(DECODE, "handoffs");
        if (sizes == null || latency == null || count == 0) {
            throw new IllegalStateException("the decode operator reported no hand-offs");
        }
        long sent = BenchMetrics.count(PREFILL, "handoffs");
        if (sent != count) {
            throw new IllegalStateException("the prefill operator sent " + sent + " hand-offs, the decode operator"
                    + " imported " + count);
        }
        return new Measured(m.tokens(), m.seconds(), m.decoderTtftMs(), m.longTtftMs(), m.decodeGapsMs(),
                m.operatorItlMs(), m.outputs(), new Handoffs(count, BenchMetrics.count(DECODE, "handoffRecords"),
                        BenchMetrics.count(DECODE, "handoffBytes"), sizes.getMean(), latency.getMean(),
                        latency.getQuantile(0.5), latency.getQuantile(0.99)));
    }

    /** One job of one layout on its own topics, with a client. */
    /** Starts this run's jobs on one broker with one set of flags, weights and engine options. */
    private record Launcher(EmbeddedKafkaBroker broker, BenchPipelineCommand flags, Path work, Path modelDir, Long seed,
            EngineOptions colocated, EngineOptions prefill, EngineOptions decode) {
        Job start(String name, Layout layout) throws Exception {
            return Job.start(broker, name, flags, work, layout, modelDir, seed, colocated, prefill, decode);
        }

        /** One measured run of {@code layout} serving {@code load}, metrics and step counts reset before it. */
        Measured measure(Layout layout, List<Arrival> load, PrintWriter err) throws Exception {
            BenchMetrics.reset();
            BenchEngineFactory.resetSteps();
            try (Job job = start(layout.name(), layout)) {
                long phaseStart = System.currentTimeMillis();
                Measured m = job.serve(load, flags.timeoutSeconds);
                PipelineBench.phase(err, layout.name(), phaseStart);
                return m;
            }
        }
    }

    private record Job(JobClient job, GenerateClient client, String name) implements AutoCloseable {
        static Job start(EmbeddedKafkaBroker broker, String name, BenchPipelineCommand flags, Path work,
                Layout layout, Path modelDir, Long seed, EngineOptions colocated, EngineOptions prefill,
                EngineOptions decode) throws Exception {
            String topic = name.replaceAll("[^A-Za-z0-9]+", "-");
            String requests = topic + "-requests";
            String responses = topic + "-responses";
            broker.createTopics(1, requests, responses);
            Configuration conf = PipelineBench.jobConfig(topic, flags, 2 * layout.failures(), work);
            BenchMetrics.configure(conf);
            GenerationPipeline.Builder pipeline = GenerationPipeline.builder()
                    .configure(conf)
                    .bootstrapServers(broker.bootstrapServers())
                    .requestsTopic(requests)
                    .responsesTopic(responses)
                    .transactionalIdPrefix("mstar-" + topic)
                    // the failover run is about what a read_committed client gets; the others about latency
                    .deliveryGuarantee(layout.failures() > 0 ? DeliveryGuarantee.EXACTLY_ONCE
                            : DeliveryGuarantee.AT_LEAST_ONCE);
            Map<EngineRole, Set<Long>> failAt = layout.failAt();
            if (layout.split()) {
                boolean byHandle = flags.sameDeviceHandoff;
                pipeline.disaggregated(true)
                        .set(DisaggregationOptions.PREFILL_PARALLELISM, 1)
                        .set(DisaggregationOptions.DECODE_PARALLELISM, 1)
                        .set(DisaggregationOptions.PREFILL_DEVICE, layout.prefillDevice())
                        .set(DisaggregationOptions.DECODE_DEVICE, layout.decodeDevice())
                        .set(DisaggregationOptions.HANDOFF_RECORD_SIZE, MemorySize.parse(flags.handoffRecordSize))
                        .prefillEngineFactory(new BenchEngineFactory(modelDir, seed, prefill,
                                failAt.getOrDefault(EngineRole.PREFILL, Set.of()), flags.batchInvariant, byHandle))
                        .decodeEngineFactory(new BenchEngineFactory(modelDir, seed, decode,
                                failAt.getOrDefault(EngineRole.DECODE, Set.of()), flags.batchInvariant, byHandle));
            } else {
                conf.set(GenerateOptions.DEVICE, layout.device());
                pipeline.engineFactory(new BenchEngineFactory(modelDir, seed, colocated,
                        failAt.getOrDefault(EngineRole.COLOCATED, Set.of()), flags.batchInvariant));
            }
            StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(layout.parallelism(),
                    conf);
            pipeline.build().addTo(env);
            JobClient job = env.executeAsync("mstar bench-pipeline " + name);
            return new Job(job, new GenerateClient(broker.bootstrapServers(), requests, responses), name);
        }

        /**
         * Sends each request at its offset (a scheduler thread sends; this one reads responses) and waits for every
         * result.
         */
        Measured serve(List<Arrival> arrivals, long timeoutSeconds) throws Exception {
            Map<String, Long> sent = new ConcurrentHashMap<>();
            Map<String, Map<Integer, Long>> received = new HashMap<>();
            Map<String, List<Integer>> outputs = new LinkedHashMap<>();
            Map<String, Double> operatorItl = new HashMap<>();
            List<String> errors = new ArrayList<>();
            List<Exception> sendFailures = Collections.synchronizedList(new ArrayList<>());
            ScheduledExecutorService sender = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "bench sender " + name);
                t.setDaemon(true);
                return t;
            });
            long t0 = System.nanoTime();
            long[] last = {t0};
            Set<String> unanswered;
            try {
                List<ScheduledFuture<?>> sends = new ArrayList<>();
                for (Arrival a : arrivals) {
                    sends.add(sender.schedule(() -> {
                        try {
                            client.sendAll(List.of(a.request()), id -> sent.put(id, System.nanoTime()));
                        } catch (Exception e) {
                            sendFailures.add(e);
                        }
                    }, a.offsetMillis(), TimeUnit.MILLISECONDS));
                }
                Set<String> ids = new LinkedHashSet<>(arrivals.stream().map(a -> a.request().getRequestId()).toList());
                Consumer<Response> listener = response -> {
                    Object event = response.getEvent();
                    long now = System.nanoTime();
                    if (event instanceof TokenEvent t) {
                        received.computeIfAbsent(t.getRequestId(), k -> new HashMap<>()).put(t.getIndex(), now);
                    } else if (event instanceof GenerateResult r) {
                        outputs.put(r.getRequestId(), List.copyOf(r.getTokenIds()));
                        operatorItl.put(r.getRequestId(), r.getTimings().getMeanInterTokenMs());
                        last[0] = now;
                    } else if (event instanceof ErrorEvent e) {
                        errors.add(e.getRequestId() + ": " + e.getCode() + " " + e.getMessage());
                    }
                };
                unanswered = client.await(ids, Duration.ofSeconds(timeoutSeconds), listener);
                // a request's first token comes through the prefill side's sink, possibly after its result
                client.pollUntil(() -> outputs.entrySet().stream().allMatch(o -> o.getValue().size()
                        == received.getOrDefault(o.getKey(), Map.of()).size()), Duration.ofSeconds(30), listener);
                for (ScheduledFuture<?> s : sends) {
                    s.get();
                }
            } finally {
                sender.shutdownNow();
            }
            if (!unanswered.isEmpty() || !errors.isEmpty() || !sendFailures.isEmpty()) {
                throw new IllegalStateException(name + ": unanswered " + unanswered + ", errors " + errors
                        + ", failed sends " + sendFailures);
            }
            List<Double> decoderTtft = new ArrayList<>();
            List<Double> longTtft = new ArrayList<>();
            List<Double> gaps = new ArrayList<>();
            List<Double> itl = new ArrayList<>();
            for (Arrival a : arrivals) {
                String id = a.request().getRequestId();
                Map<Integer, Long> at = received.get(id);
                Long first = at == null ? null : at.get(0);
                if (first == null || at.size() != outputs.get(id).size()) {
                    throw new IllegalStateException(name + ": " + id + " streamed " + (at == null ? 0 : at.size())
                            + " tokens of " + outputs.get(id).size());
                }
                (a.decoder() ? decoderTtft : longTtft).add((first - sent.get(id)) / 1e6);
                if (a.decoder()) {
                    // from index 2 on: in both layouts, gaps between two steps of the same decode engine
                    for (int i = 2; i < at.size(); i++) {
                        gaps.add((at.get(i) - at.get(i - 1)) / 1e6);
                    }
                    itl.add(operatorItl.get(id));
                }
            }
            long tokens = outputs.values().stream().mapToLong(List::size).sum();
            return new Measured(tokens, (last[0] - t0) / 1e9, decoderTtft, longTtft, gaps, itl, outputs, null);
        }

        @Override
        public void close() throws Exception {
            client.close();
            job.cancel().get();
        }
    }

    private static String table(BenchPipelineCommand flags, List<String> devices, Map<String, Measured> measured,
            List<Arrival> load) {
        StringBuilder b = new StringBuilder();
        long longOnes = load.stream().filter(a -> !a.decoder()).count();
        b.append(String.format(Locale.ROOT, "Disaggregation: %d decoders (%d prompt tokens, %d generated) sent at"
                        + " once; %d long prompts (%s tokens, %d generated) sent from %d ms on, %d ms apart;"
                        + " greedy, EOS ignored; hand-off records of at most %s; devices %s; batch-invariant numerics"
                        + " %s%n%n",
                flags.decoders, flags.decoderPromptLen, flags.decoderMaxTokens, longOnes, flags.longPromptLens,
                flags.longMaxTokens, flags.longStartMillis, flags.longIntervalMillis, flags.handoffRecordSize,
                String.join(", ", devices), flags.batchInvariant ? "on" : "off"));
        b.append("| layout | requests | tokens | tok/s | same tokens | TTFT p50/p99 ms decoders | TTFT p50/p99 ms long"
                + " prompts | decode ITL p50/p99 ms (client, per token) | decode ITL p50/p99 ms (operator, mean per"
                + " request) | hand-offs | hand-off MB | hand-off GB/s | hand-off latency p50/p99 ms |\n");
        b.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        Measured reference = measured.get("colocated");
        measured.forEach((layout, m) -> {
            long same = reference.outputs().entrySet().stream()
                    .filter(o -> o.getValue().equals(m.outputs().get(o.getKey()))).count();
            Handoffs h = m.handoffs();
            b.append(String.format(Locale.ROOT, "| %s | %d | %d | %.0f | %d of %d | %s | %s | %s | %s | %s | %s | %s"
                            + " | %s |%n", layout, m.outputs().size(), m.tokens(), m.tokensPerSecond(), same,
                    reference.outputs().size(), pair(m.decoderTtftMs()), pair(m.longTtftMs()), pair(m.decodeGapsMs()),
                    pair(m.operatorItlMs()),
                    h == null ? "-" : h.count() + " (" + h.records() + " records)",
                    h == null ? "-" : String.format(Locale.ROOT, "%.1f", h.bytes() / 1e6),
                    h == null ? "-" : String.format(Locale.ROOT, "%.3g", h.gbPerSecond()),
                    h == null ? "-" : String.format(Locale.ROOT, "%.0f / %.0f", h.latencyP50Ms(), h.latencyP99Ms())));
        });
        b.append("\nrun ").append(Instant.now()).append('\n');
        return b.toString();
    }

    private static String pair(List<Double> values) {
        return String.format(Locale.ROOT, "%.1f / %.1f", PipelineBench.percentile(values, 50),
                PipelineBench.percentile(values, 99));
    }
}
