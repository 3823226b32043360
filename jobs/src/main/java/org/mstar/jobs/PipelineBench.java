package org.mstar.jobs;

import java.io.InputStream;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.IntStream;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExecutionOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.FileUtils;
import org.mstar.device.Device;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.EngineRole;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.LlamaEngineLoader;
import org.mstar.engine.StepResult;
import org.mstar.flink.BackpressureCheckpoints;
import org.mstar.flink.DeviceTurn;
import org.mstar.flink.EngineFactory;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.GenerateResult;
import org.mstar.schemas.Timings;
import org.mstar.schemas.TokenEvent;
import picocli.CommandLine;

/**
 * Runs {@code mstar bench-pipeline}. The same loads go through the bare engine (submit everything, step until
 * done) and then through one Flink job (in-process Kafka, RocksDB checkpoints, the generate operator, a client that
 * sends all requests of a load at once and waits for every result), both over one copy of the weights. Tokens/s is
 * generated tokens over the wall time from the first submission (send) to the last result (received by the
 * client); TTFT and inter-token latency are the engine's own per-request timings (for the job: those the operator
 * reports in each GenerateResult), so both sides are measured alike; the client's TTFT adds delivery through Kafka.
 */
final class PipelineBench {
    private static final int PAGE_SIZE = 16;
    private static final long PROMPT_SEED = 7;

    private PipelineBench() {}

    /** Requests sent together. */
    private record Load(String name, List<GenerateRequest> requests) {}

    /** One side's measurement of one load. */
    /** @param outputs each request's generated token ids */
    private record Measured(long tokens, double seconds, List<Double> ttftMs, List<Double> itlMs,
                            List<Double> clientTtftMs, Map<String, List<Integer>> outputs) {
        double tokensPerSecond() {
            return tokens / seconds;
        }
    }

    static int run(BenchPipelineCommand flags, CommandLine cli) throws Exception {
        PrintWriter out = cli.getOut();
        PrintWriter err = cli.getErr();
        Path work = Files.createTempDirectory("mstar-bench-pipeline-");
        try {
            BenchModelFlags.Resolved resolved = flags.modelFlags.resolve(work);
            Path modelDir = resolved.dir();
            Long seed = resolved.randomSeed();
            ModelConfig config = ModelConfig.load(modelDir);
            if (flags.disaggregation) {
                return DisaggregationBench.run(flags, modelDir, seed, config, work, out, err);
            }
            EngineOptions options = new EngineOptions(flags.sizing.maxBatchRows, flags.sizing.tokenBudget,
                    KvCacheOptions.builder()
                            .maxSeqLen(Math.min(config.maxPositionEmbeddings(),
                                    2 * flags.promptLen + 2 * flags.maxTokens + PAGE_SIZE))
                            .maxNumPages(flags.sizing.pages).pageSize(PAGE_SIZE).build());

            Random rnd = new Random(PROMPT_SEED);
            Load warmUp = batch("warm-up", 2, Math.min(64, flags.promptLen), 8, config, rnd);
            List<Load> loads = new ArrayList<>();
            for (int b : flags.batches) {
                loads.add(batch("batch " + b, b, flags.promptLen, flags.maxTokens, config, rnd));
            }
            if (flags.mixed > 0) {
                loads.add(mixed("mixed " + flags.mixed, flags.mixed, flags.promptLen, flags.maxTokens, config, rnd,
                        false));
            }

            long start = System.nanoTime();
            BenchModels.Loaded shared = BenchModels.get(modelDir, seed, flags.modelFlags.device);
            err.printf(Locale.ROOT, "%s on %s: weights %s in %.1f s%n", seed == null ? modelDir : "random weights",
                    shared.turn().device().name(), seed == null ? "loaded" : "made", (System.nanoTime() - start) / 1e9);
            err.flush();

            Map<String, Measured> engine = new LinkedHashMap<>();
            DeviceTurn turn = shared.turn();
            Device view = turn.device().withOptions(turn.device().options().withBatchInvariant(flags.batchInvariant));
            GenerationEngine bare = turn.guard(turn.call(() -> LlamaEngineLoader.load(modelDir, shared.weights(), view,
                    options.withDecodeGraphs(view.isCuda()))));
            try {
                runEngine(bare, warmUp);
                for (Load load : loads) {
                    long phaseStart = System.currentTimeMillis();
                    engine.put(load.name(), runEngine(bare, load));
                    phase(err, "engine " + load.name(), phaseStart);
                }
            } finally {
                bare.close();
            }

            Map<String, Measured> pipeline = new LinkedHashMap<>();
            try (EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start()) {
                BenchEngineFactory factory = new BenchEngineFactory(modelDir, seed, options, Set.of(),
                        flags.batchInvariant);
                JobRun job = JobRun.start(broker, "bench", factory, flags, DeliveryGuarantee.AT_LEAST_ONCE, 0, work);
                try {
                    job.serve(warmUp, flags.timeoutSeconds);
                    for (Load load : loads) {
                        long phaseStart = System.currentTimeMillis();
                        pipeline.put(load.name(), job.serve(load, flags.timeoutSeconds).measured());
                        phase(err, "flink " + load.name(), phaseStart);
                    }
                } finally {
                    job.close();
                }
                out.print(table(engine, pipeline));
                out.flush();
                if (flags.failures > 0) {
                    Load failover = mixed("failover", flags.failoverRequests, flags.promptLen, flags.maxTokens, config,
                            rnd, true);
                    return failover(broker, modelDir, seed, options, flags, failover, work, out) ? 0 : 1;
                }
            }
            return 0;
        } finally {
            FileUtils.deleteDirectory(work.toFile());
        }
    }

    /**
     * Serves {@code load} under EXACTLY_ONCE three times: twice uninterrupted (how far the device's numerics repeat
     * from run to run when requests are batched differently) and once with injected task failures spread over the
     * run, and compares what a read_committed consumer got.
     *
     * @return whether every request of the failover run was complete, each token once and in order
     */
    private static boolean failover(EmbeddedKafkaBroker broker, Path modelDir, Long seed, EngineOptions options,
            BenchPipelineCommand flags, Load load, Path work, PrintWriter out) throws Exception {
        BenchEngineFactory.resetSteps();
        JobRun.Served reference = serveOnce(broker, "reference", new BenchEngineFactory(modelDir, seed, options,
                Set.of(), flags.batchInvariant), flags, 0, load, work);
        long steps = BenchEngineFactory.resetSteps().getOrDefault(EngineRole.COLOCATED, 0L);
        JobRun.Served control = serveOnce(broker, "control", new BenchEngineFactory(modelDir, seed, options,
                Set.of(), flags.batchInvariant), flags, 0, load, work);
        Set<Long> failAt = new TreeSet<>();
        for (int i = 1; i <= flags.failures; i++) {
            failAt.add(Math.max(1, steps * i / (flags.failures + 1)));
        }
        BenchEngineFactory.resetSteps();
        int eventsBefore = BenchEngineFactory.events().size();
        long start = System.nanoTime();
        JobRun.Served failed = serveOnce(broker, "failover", new BenchEngineFactory(modelDir, seed, options, failAt,
                flags.batchInvariant), flags, flags.failures, load, work);
        double seconds = (System.nanoTime() - start) / 1e9;

        List<String> incomplete = new ArrayList<>();
        for (GenerateRequest r : load.requests()) {
            List<Integer> tokens = failed.tokens().get(r.getRequestId());
            if (tokens == null || tokens.size() != r.getMaxTokens() || !failed.eventsMatchResult(r.getRequestId())) {
                incomplete.add(r.getRequestId());
            }
        }
        int n = load.requests().size();
        out.printf(Locale.ROOT, "%nFailover: %d requests (half greedy, half seeded sampling), %d engine steps"
                + " uninterrupted; task failures injected at steps %s; EXACTLY_ONCE, checkpoints every %d ms;"
                + " %.1f s with restarts%n", n, steps, failAt, flags.checkpointMillis, seconds);
        out.printf(Locale.ROOT, "complete, each token committed once and in order: %d of %d%s%n",
                n - incomplete.size(), n, incomplete.isEmpty() ? "" : " (not: " + incomplete + ")");
        out.printf(Locale.ROOT, "committed outputs identical to the uninterrupted run: %s%n",
                agreement(load, reference, failed));
        out.printf(Locale.ROOT, "a second uninterrupted run identical to the first: %s%n",
                agreement(load, reference, control));
        List<String> events = BenchEngineFactory.events();
        events.subList(eventsBefore, events.size()).forEach(e -> out.println("  " + e));
        out.flush();
        return incomplete.isEmpty();
    }

    private static JobRun.Served serveOnce(EmbeddedKafkaBroker broker, String name, BenchEngineFactory factory,
            BenchPipelineCommand flags, int restarts, Load load, Path work) throws Exception {
        JobRun run = JobRun.start(broker, name, factory, flags, DeliveryGuarantee.EXACTLY_ONCE, restarts, work);
        try {
            return run.serve(load, flags.timeoutSeconds);
        } finally {
            run.close();
        }
    }

    /** "k of n", and for the requests that differ, where their tokens first do (median and smallest index). */
    private static String agreement(Load load, JobRun.Served expected, JobRun.Served actual) {
        List<Double> firstDifference = new ArrayList<>();
        for (GenerateRequest r : load.requests()) {
            List<Integer> a = expected.tokens().get(r.getRequestId());
            List<Integer> b = actual.tokens().get(r.getRequestId());
            if (!a.equals(b)) {
                int i = 0;
                while (i < Math.min(a.size(), b.size()) && a.get(i).equals(b.get(i))) {
                    i++;
                }
                firstDifference.add((double) i);
            }
        }
        int n = load.requests().size();
        String out = (n - firstDifference.size()) + " of " + n;
        if (!firstDifference.isEmpty()) {
            out += String.format(Locale.ROOT, " (the others first differ at token %.0f, median; %.0f, earliest)",
                    percentile(firstDifference, 50), percentile(firstDifference, 0));
        }
        return out;
    }

    /** Submits every request at once and steps until all are done. */
    private static Measured runEngine(GenerationEngine engine, Load load) {
        long t0 = System.nanoTime();
        for (GenerateRequest r : load.requests()) {
            engine.submit(GenerationRequest.builder(r.getRequestId())
                    .promptTokenIds(r.getPromptTokenIds().stream().mapToInt(i -> i).toArray())
                    .sampling(SamplingReqConfig.greedy()).maxTokens(r.getMaxTokens()).ignoreEos(true).build());
        }
        long tokens = 0;
        List<Double> ttft = new ArrayList<>();
        List<Double> itl = new ArrayList<>();
        Map<String, List<Integer>> outputs = new HashMap<>();
        while (engine.hasWork()) {
            StepResult step = engine.step();
            if (!step.failures().isEmpty()) {
                throw new IllegalStateException("engine failed requests: " + step.failures());
            }
            tokens += step.tokens().size();
            for (FinishedRequest f : step.finished()) {
                ttft.add(f.timings().timeToFirstTokenNanos() / 1e6);
                itl.add(f.timings().meanInterTokenNanos() / 1e6);
                outputs.put(f.requestId(), Arrays.stream(f.tokenIds()).boxed().toList());
            }
        }
        return new Measured(tokens, (System.nanoTime() - t0) / 1e9, ttft, itl, List.of(), outputs);
    }

    /** One Flink job on its own topics, served load by load by a client. */
    private record JobRun(JobClient job, GenerateClient client) implements AutoCloseable {
        /** What the client received for one load. */
        record Served(Measured measured, Map<String, List<Integer>> tokens, Map<String, List<Integer>> streamed) {
            /** Whether the streamed TokenEvents of {@code id} are exactly its result's ids, each once, in order. */
            boolean eventsMatchResult(String id) {
                return tokens.get(id) != null && tokens.get(id).equals(streamed.get(id));
            }
        }

        static JobRun start(EmbeddedKafkaBroker broker, String name, BenchEngineFactory factory,
                BenchPipelineCommand flags, DeliveryGuarantee guarantee, int restarts, Path work) throws Exception {
            String requests = name + "-requests";
            String responses = name + "-responses";
            broker.createTopics(1, requests, responses);
            JobClient job = startJob(broker, requests, responses, factory, guarantee,
                    jobConfig(name, flags, restarts, work), "mstar bench-pipeline " + name);
            return new JobRun(job, new GenerateClient(broker.bootstrapServers(), requests, responses));
        }

        Served serve(Load load, long timeoutSeconds) throws Exception {
            Map<String, Long> sent = new HashMap<>();
            Map<String, Long> firstToken = new HashMap<>();
            Map<String, List<Integer>> tokens = new LinkedHashMap<>();
            Map<String, List<Integer>> streamed = new HashMap<>();
            List<Double> ttft = new ArrayList<>();
            List<Double> itl = new ArrayList<>();
            List<String> errors = new ArrayList<>();
            long t0 = System.nanoTime();
            client.sendAll(load.requests(), id -> sent.put(id, System.nanoTime()));
            Set<String> ids = new LinkedHashSet<>(load.requests().stream().map(GenerateRequest::getRequestId).toList());
            long[] last = {t0};
            Set<String> unanswered = client.await(ids, Duration.ofSeconds(timeoutSeconds), response -> {
                Object event = response.getEvent();
                long now = System.nanoTime();
                if (event instanceof TokenEvent t) {
                    firstToken.putIfAbsent(t.getRequestId(), now);
                    streamed.computeIfAbsent(t.getRequestId(), k -> new ArrayList<>()).add(t.getTokenId());
                } else if (event instanceof GenerateResult r) {
                    tokens.put(r.getRequestId(), List.copyOf(r.getTokenIds()));
                    Timings timings = r.getTimings();
                    ttft.add(timings.getTimeToFirstTokenMs());
                    itl.add(timings.getMeanInterTokenMs());
                    last[0] = now;
                } else if (event instanceof ErrorEvent e) {
                    errors.add(e.getRequestId() + ": " + e.getCode() + " " + e.getMessage());
                }
            });
            if (!unanswered.isEmpty() || !errors.isEmpty()) {
                throw new IllegalStateException(load.name() + ": unanswered " + unanswered + ", errors " + errors);
            }
            List<Double> clientTtft = new ArrayList<>();
            firstToken.forEach((id, at) -> clientTtft.add((at - sent.get(id)) / 1e6));
            long count = tokens.values().stream().mapToLong(List::size).sum();
            return new Served(new Measured(count, (last[0] - t0) / 1e9, ttft, itl, clientTtft, tokens), tokens,
                    streamed);
        }

        @Override
        public void close() throws Exception {
            client.close();
            job.cancel().get();
        }
    }

    /** Submits the generation job between two topics of {@code broker} to a local environment of {@code conf}. */
    static JobClient startJob(EmbeddedKafkaBroker broker, String requests, String responses, EngineFactory factory,
            DeliveryGuarantee guarantee, Configuration conf, String jobName) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, conf);
        GenerationPipeline.builder()
                .configure(conf)
                .bootstrapServers(broker.bootstrapServers())
                .requestsTopic(requests)
                .responsesTopic(responses)
                .deliveryGuarantee(guarantee)
                .transactionalIdPrefix("mstar-" + requests)
                .engineFactory(factory)
                .build()
                .addTo(env);
        return env.executeAsync(jobName);
    }

    /**
     * A measured job's configuration: RocksDB checkpoints every {@code --checkpoint-interval}, the buffer timeout,
     * {@code restarts} fixed-delay restarts, the engines on {@code --device}.
     */
    static Configuration jobConfig(String name, BenchPipelineCommand flags, int restarts, Path work) {
        return jobConfig(name, flags.checkpointMillis, flags.bufferTimeoutMillis, restarts, flags.modelFlags.device, work);
    }

    /** A measured job's configuration, from the values of the flags above. */
    static Configuration jobConfig(String name, long checkpointMillis, long bufferTimeoutMillis, int restarts,
            String device, Path work) {
        Configuration conf = new Configuration();
        conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(checkpointMillis));
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, work.resolve("checkpoints-" + name).toUri().toString());
        conf.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
        conf.set(ExecutionOptions.BUFFER_TIMEOUT, Duration.ofMillis(bufferTimeoutMillis));
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, restarts);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofMillis(200));
        conf.set(GenerateOptions.DEVICE, device);
        ChangelogCheckpoints.applyTo(conf, work.resolve("changelog-" + name).toUri().toString());
        return BackpressureCheckpoints.applyTo(conf);
    }

    private static Load batch(String name, int n, int promptLen, int maxTokens, ModelConfig config, Random rnd) {
        String prefix = name.replace(' ', '-');
        return new Load(name, IntStream.range(0, n)
                .mapToObj(i -> request(prefix + "-" + i, prompt(rnd, promptLen, config), maxTokens, null))
                .toList());
    }

    /** Lengths spread over prompt-len/8 .. 2 x prompt-len and max-tokens/8 .. 2 x max-tokens. */
    private static Load mixed(String name, int n, int promptLen, int maxTokens, ModelConfig config, Random rnd,
            boolean halfSampled) {
        String prefix = name.replace(' ', '-');
        List<GenerateRequest> requests = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int p = Math.max(1, promptLen / 8 + rnd.nextInt(2 * promptLen - promptLen / 8 + 1));
            int o = Math.max(1, maxTokens / 8 + rnd.nextInt(2 * maxTokens - maxTokens / 8 + 1));
            requests.add(request(prefix + "-" + i, prompt(rnd, p, config), o, halfSampled && i % 2 == 1 ? 1000L + i : null));
        }
        return new Load(name, requests);
    }

    /** EOS ignored, so every run generates the same number of tokens; greedy unless a sampling seed is given. */
    private static GenerateRequest request(String id, List<Integer> prompt, int maxTokens, Long samplingSeed) {
        return GenerateRequest.newBuilder()
                .setRequestId(id)
                .setPromptTokenIds(prompt)
                .setMaxTokens(maxTokens)
                .setTemperature(samplingSeed == null ? 0.0 : 0.8)
                .setTopP(samplingSeed == null ? null : 0.95)
                .setSeed(samplingSeed)
                .setIgnoreEos(true)
                .build();
    }

    /** Random ids above the special ones at the start of the vocabulary. */
    private static List<Integer> prompt(Random rnd, int length, ModelConfig config) {
        return IntStream.range(0, length).mapToObj(i -> 3 + rnd.nextInt(config.vocabSize() - 3)).toList();
    }

    static void writeConfig(String randomConfig, Path target) throws Exception {
        if (randomConfig != null) {
            Files.copy(Path.of(randomConfig), target);
            return;
        }
        try (InputStream in = ModelSource.class.getResourceAsStream(ModelSource.BUNDLED_CONFIG)) {
            if (in == null) {
                throw new IllegalStateException("bundled model config " + ModelSource.BUNDLED_CONFIG + " is missing");
            }
            Files.copy(in, target);
        }
    }

    /**
     * The progress line of a finished phase: its name and duration, then its epoch-millisecond bounds, which the GPU
     * run script (scripts/gpu/run-pipeline.sh) matches with its utilisation samples.
     */
    static void phase(PrintWriter err, String name, long startMillis) {
        long end = System.currentTimeMillis();
        err.printf(Locale.ROOT, "done: %s in %.1f s [%d-%d ms]%n", name, (end - startMillis) / 1000.0, startMillis, end);
        err.flush();
    }

    private static String table(Map<String, Measured> engine, Map<String, Measured> pipeline) {
        StringBuilder b = new StringBuilder();
        b.append("| load | requests | tokens | engine tok/s | Flink tok/s | Flink/engine | same tokens"
                + " | TTFT p50/p99 ms engine | TTFT p50/p99 ms Flink | ITL p50/p99 ms engine | ITL p50/p99 ms Flink"
                + " | client TTFT p50/p99 ms |\n");
        b.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        engine.forEach((name, e) -> {
            Measured f = pipeline.get(name);
            long same = e.outputs().entrySet().stream()
                    .filter(o -> o.getValue().equals(f.outputs().get(o.getKey()))).count();
            b.append(String.format(Locale.ROOT, "| %s | %d | %d | %.0f | %.0f | %.3f | %d of %d | %s | %s | %s | %s | %s |%n",
                    name, e.ttftMs().size(), e.tokens(), e.tokensPerSecond(), f.tokensPerSecond(),
                    f.tokensPerSecond() / e.tokensPerSecond(), same, e.outputs().size(), pair(e.ttftMs()),
                    pair(f.ttftMs()), pair(e.itlMs()), pair(f.itlMs()), pair(f.clientTtftMs())));
        });
        b.append("\nrun ").append(Instant.now()).append('\n');
        return b.toString();
    }

    private static String pair(List<Double> values) {
        return String.format(Locale.ROOT, "%.1f / %.1f", percentile(values, 50), percentile(values, 99));
    }

    /** Nearest-rank percentile. */
    static double percentile(List<Double> values, double p) {
        if (values.isEmpty()) {
            return Double.NaN;
        }
        List<Double> sorted = values.stream().sorted().toList();
        int rank = (int) Math.ceil(p / 100 * sorted.size());
        return sorted.get(Math.max(0, rank - 1));
    }

    static String gib(long bytes) {
        return bytes < 0 ? "n/a (cpu)" : String.format(Locale.ROOT, "%.2f GiB", bytes / (double) (1L << 30));
    }
}
