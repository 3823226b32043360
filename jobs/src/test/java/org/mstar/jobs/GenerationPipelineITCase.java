package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.jobs.CancelledJobs.cancel;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.AbstractMap;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.engine.GenerationEngine;
import org.mstar.flink.EngineFactory;
import org.mstar.flink.FakeEngineFactory;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import org.mstar.flink.LlamaEngineFactory;
import org.mstar.flink.LlamaEngineOptions;
import org.mstar.flink.ScenarioEngineFactory;
import org.mstar.flink.ScenarioEngineFactory.Scenario;
import org.mstar.flink.TestRequests;
import org.mstar.model.lora.RandomPeftAdapters;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;

/**
 * The whole job on a Flink MiniCluster (RocksDB state) between topics of an in-process Kafka broker: with the
 * fake engine, exactly-once output, recovery from injected failures, at-least-once repeats, rescaling through
 * savepoints and bad input; with the Llama engine on a small random model, recovery with identical tokens; with
 * tiny Mamba2 and Bamba checkpoints, transformers' tokens through a recovery, and bad input.
 * Every check reads the responses topic as a read_committed consumer.
 */
class GenerationPipelineITCase {
    private static final Duration TIMEOUT = Duration.ofSeconds(90);

    @RegisterExtension
    static final MiniClusterExtension FLINK = new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
            .setNumberTaskManagers(1).setNumberSlotsPerTaskManager(4).build());

    @RegisterExtension
    static final KafkaBrokerExtension KAFKA = new KafkaBrokerExtension();

    @TempDir
    Path tmp;

    @Test
    void everyRequestGetsItsCompleteTokenStreamAndOneResult() throws Exception {
        List<GenerateRequest> requests = TestRequests.requests("e2e", 20);
        Job job = new Job("e2e", 2, Duration.ofMillis(1));
        KAFKA.kafka().produce(job.requests, requests);

        JobClient client = job.start(job.config(), 2);
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses, c -> c.resultCount() >= requests.size(), TIMEOUT);
        cancel(client);

        out.assertComplete(requests);
        assertThat(out.errors).isEmpty();
    }

    @Test
    void committedOutputAfterInjectedFailuresEqualsAnUninterruptedRun() throws Exception {
        List<GenerateRequest> requests = TestRequests.requests("fail", 40);
        Job job = new Job("fail", 2, Duration.ofMillis(5));
        Scenario scenario = Scenario.start(job.name);
        KAFKA.kafka().produce(job.requests, requests);

        Configuration conf = job.config();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 5);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofMillis(100));
        JobClient client = job.start(conf, 2);
        // Each failure waits for more committed results, so a checkpoint completed since the previous one.
        int[] failAfterResults = {6, 14, 22};
        for (int i = 0; i < failAfterResults.length; i++) {
            int results = failAfterResults[i];
            KAFKA.kafka().readUntil(job.responses, c -> c.resultCount() >= results, TIMEOUT);
            scenario.failNextStep();
            scenario.awaitFailures(i + 1, TIMEOUT);
        }
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses, c -> c.resultCount() >= requests.size(), TIMEOUT);
        cancel(client);

        out.assertComplete(requests);
        assertThat(out.errors).isEmpty();
        assertThat(scenario.resumedMidGeneration()).as("requests resumed from a checkpoint mid-generation").isPositive();
    }

    /** Also with decode steps launched ahead (as on a GPU): the failure then finds a step in flight to drop. */
    @ParameterizedTest(name = "decode steps launched ahead: {0}")
    @ValueSource(booleans = {false, true})
    void theLlamaEngineOnARandomModelRecoversFromAFailureWithIdenticalTokens(boolean launchAhead) throws Exception {
        String name = launchAhead ? "llama-ahead" : "llama";
        LlamaEngineFactory llama = llama("random-" + name);
        List<GenerateRequest> requests = TestRequests.requests("llama", 24);
        for (int i = 1; i < requests.size(); i += 2) { // token-id prompts besides text ones
            requests.get(i).setPrompt(null);
            requests.get(i).setPromptTokenIds(List.of(5 + i, 40 + i, 7, 300 - i));
        }
        for (int i = 0; i < requests.size(); i += 6) { // structured output: the restore replays tokens through the automaton
            requests.get(i).setMaxTokens(40);
            requests.get(i).setRegex("[a-z]{1,6}( [a-z]{1,6}){2,8}");
        }
        Map<String, List<Integer>> expected;
        try (GenerationEngine reference = llama.create("cpu", 0)) {
            expected = TestRequests.reference(requests, reference);
        }
        long launchedBefore = CpuLlamaEngineFactory.launchedAhead();
        EngineFactory served = launchAhead ? CpuLlamaEngineFactory.launchingAhead(tmp.resolve("random-" + name)) : llama;
        TestRequests.Collected out = recoveredFromAFailure(new Job(name, served), requests, expected, 150);
        assertThat(CpuLlamaEngineFactory.launchedAhead() > launchedBefore).as("decode steps launched ahead")
                .isEqualTo(launchAhead);
        assertThat(out.results.get("llama-0").get(0).getText()).as("detokenised text").isNotEmpty();
        for (int i = 0; i < requests.size(); i += 6) {
            var result = out.results.get("llama-" + i).get(0);
            assertThat(result.getFinishReason()).isEqualTo("stop");
            assertThat(result.getText()).matches("[a-z]{1,6}( [a-z]{1,6}){2,8}");
        }
    }

    /**
     * Mamba2 and Bamba (the fixtures transformers wrote: Mamba2 mixers, Bamba's layer 1 attention) served by the
     * default factory from their folders: each request's committed tokens are transformers' greedy continuation, also
     * across a task failure mid-generation, after which the restore rebuilds each request's recurrent state from its
     * prompt and the tokens it had emitted.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"mamba2", "bamba"})
    void aHybridModelRecoversFromAFailureWithTransformersTokens(String arch) throws Exception {
        LlamaEngineFactory hybrid = hybrid(arch, arch);
        TinyHybrid.Reference ref = TinyHybrid.reference(arch, tmp.resolve(arch + "-reference"));
        int maxTokens = 48;
        List<GenerateRequest> requests = new ArrayList<>();
        Map<String, List<Integer>> expected = new HashMap<>();
        for (int p = 0; p < ref.prompts().size(); p++) {
            GenerateRequest r = TestRequests.request(arch + "-" + p, p);
            r.setPrompt(null);
            r.setPromptTokenIds(Arrays.stream(ref.prompts().get(p)).boxed().toList());
            r.setMaxTokens(maxTokens);
            r.setTemperature(0.0);
            r.setIgnoreEos(true);
            requests.add(r);
            expected.put(r.getRequestId(), Arrays.stream(ref.tokens().get(p), 0, maxTokens).boxed().toList());
        }
        recoveredFromAFailure(new Job(arch, hybrid), requests, expected, 60);
    }

    /**
     * Serves {@code requests} at parallelism 2 with a failure once {@code tokens} tokens are generated
     * ({@link #startAndFailMidGeneration}), and checks that each request's committed tokens are its {@code expected}
     * ones, that no request failed and that some were resumed mid-generation. Returns what was committed.
     */
    private static TestRequests.Collected recoveredFromAFailure(Job job, List<GenerateRequest> requests,
            Map<String, List<Integer>> expected, int tokens) throws Exception {
        Scenario scenario = Scenario.start(job.name);
        scenario.pauseAfterTokens(tokens);
        KAFKA.kafka().produce(job.requests, requests);

        JobClient client = startAndFailMidGeneration(job, scenario, 2);
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses, c -> c.resultCount() >= requests.size(), TIMEOUT);
        cancel(client);

        out.assertComplete(requests, expected);
        assertThat(out.errors).isEmpty();
        assertThat(scenario.resumedMidGeneration()).as("requests resumed from a checkpoint mid-generation").isPositive();
        return out;
    }

    @Test
    void atLeastOnceRepeatsOnlyIdenticalEventsThatConsumersDrop() throws Exception {
        List<GenerateRequest> requests = TestRequests.requests("alo", 30);
        Job job = new Job("alo", 2, Duration.ofMillis(5));
        Scenario scenario = Scenario.start(job.name);
        KAFKA.kafka().produce(job.requests, requests);

        Configuration conf = job.config();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofMillis(100));
        JobClient client = job.start(conf, 2, DeliveryGuarantee.AT_LEAST_ONCE);
        KAFKA.kafka().readUntil(job.responses, c -> c.resultCount() >= 8, TIMEOUT);
        scenario.failNextStep();
        scenario.awaitFailures(1, TIMEOUT);
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses,
                c -> c.results.keySet().containsAll(requests.stream().map(GenerateRequest::getRequestId).toList()),
                TIMEOUT);
        cancel(client);

        KafkaTestSupport.firstOfEach(out).assertComplete(requests);
    }

    @Test
    void savepointAtParallelismOneResumesAtTwo() throws Exception {
        rescale("up", 1, 2);
    }

    @Test
    void savepointAtParallelismTwoResumesAtOne() throws Exception {
        rescale("down", 2, 1);
    }

    private void rescale(String name, int before, int after) throws Exception {
        List<GenerateRequest> requests = TestRequests.requests(name, 30);
        Job job = new Job(name, 2, Duration.ofMillis(5));
        Scenario scenario = Scenario.start(job.name);
        KAFKA.kafka().produce(job.requests, requests);

        JobClient first = job.start(job.config(), before);
        KAFKA.kafka().readUntil(job.responses, c -> c.resultCount() >= requests.size() / 4, TIMEOUT);
        scenario.pause(); // so the savepoint holds requests mid-generation
        String savepoint = first.stopWithSavepoint(false, tmp.resolve("savepoints").toUri().toString(),
                SavepointFormatType.CANONICAL).get();
        scenario.unpause();

        Configuration conf = job.config();
        conf.set(StateRecoveryOptions.SAVEPOINT_PATH, savepoint);
        JobClient second = job.start(conf, after);
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses, c -> c.resultCount() >= requests.size(), TIMEOUT);
        cancel(second);

        out.assertComplete(requests);
        assertThat(out.errors).isEmpty();
        assertThat(scenario.resumedMidGeneration()).as("requests resumed from the savepoint mid-generation").isPositive();
    }

    @ParameterizedTest(name = "{0} engine")
    @ValueSource(strings = {"fake", "llama", "bamba"})
    void badInputGetsOneErrorEachWhileTheJobRunsOn(String engine) throws Exception {
        LlamaEngineFactory real = switch (engine) {
            case "llama" -> llama("bad");
            case "bamba" -> hybrid("bamba", "bad-bamba");
            default -> null;
        };
        Job job = real == null ? new Job("bad-fake", 2, Duration.ZERO) : new Job("bad-" + engine, real);
        Scenario scenario = Scenario.start(job.name);
        List<GenerateRequest> good = TestRequests.requests("good", 4);
        byte[] valid = KafkaTestSupport.bytes(good.get(0));
        List<Map.Entry<String, byte[]>> records = new ArrayList<>();
        records.add(Map.entry("good-0", valid));
        records.add(Map.entry("bad-bytes", "{\"prompt\": \"json is not accepted\"}".getBytes(StandardCharsets.UTF_8)));
        records.add(Map.entry("bad-truncated", Arrays.copyOf(valid, valid.length - 5)));
        records.add(new AbstractMap.SimpleEntry<>("bad-null", null));
        records.add(Map.entry("bad-no-id", KafkaTestSupport.bytes(TestRequests.request("", 1))));
        records.add(Map.entry("good-1", KafkaTestSupport.bytes(good.get(1))));
        records.add(bad("bad-no-prompt", r -> r.setPrompt(null)));
        records.add(bad("bad-max-tokens", r -> r.setMaxTokens(-3)));
        records.add(bad("bad-nan", r -> r.setTemperature(Double.NaN)));
        records.add(bad("bad-top-p", r -> r.setTopP(-0.5)));
        records.add(bad("bad-empty", r -> r.setPrompt("")));
        records.add(Map.entry("good-2", KafkaTestSupport.bytes(good.get(2))));
        records.add(bad("bad-too-long", r -> r.setPrompt("word ".repeat(600)))); // over both engines' contexts
        records.add(bad("bad-stop-id", r -> {
            r.setMinTokens(4);
            r.setStopTokenIds(List.of(999_999));
        }));
        records.add(bad("bad-option", r -> r.setSamplingOptions(Map.of("beam_width", "4"))));
        records.add(Map.entry("good-3", KafkaTestSupport.bytes(good.get(3))));
        List<String> badIds = records.stream().map(Map.Entry::getKey).filter(k -> k.startsWith("bad-")).toList();
        KAFKA.kafka().produceRaw(job.requests, records);

        Configuration conf = job.config();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        JobClient client = job.start(conf, 1);
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses,
                c -> c.resultCount() >= good.size() && c.errors.size() >= badIds.size(), TIMEOUT);
        JobStatus status = client.getJobStatus().get();
        cancel(client);

        assertThat(status).isEqualTo(JobStatus.RUNNING);
        assertThat(scenario.engines()).as("engines built: none was rebuilt by a restart").isEqualTo(1);
        if (real == null) {
            out.assertComplete(good);
        } else {
            try (GenerationEngine reference = real.create("cpu", 0)) {
                out.assertComplete(good, TestRequests.reference(good, reference));
            }
        }
        assertThat(out.errors).extracting(ErrorEvent::getRequestId).containsExactlyInAnyOrderElementsOf(badIds);
        assertThat(out.errors).allSatisfy(e -> assertThat(e.getCode()).isEqualTo(400));
    }

    @Test
    void aConstrainedRequestGetsJsonOfItsSchemaAndAnInvalidConstraintA400() throws Exception {
        Job job = new Job("structured", llama("structured"));
        String schema = "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":8},"
                + "\"population\":{\"type\":\"integer\"}},\"required\":[\"city\",\"population\"]}";
        GenerateRequest constrained = GenerateRequest.newBuilder().setRequestId("json").setPrompt("Extract: Paris, 2.1M")
                .setMaxTokens(120).setTemperature(1.0).setSeed(3L).setJsonSchema(schema).build();
        GenerateRequest invalid = GenerateRequest.newBuilder().setRequestId("bad-regex").setPrompt("x").setMaxTokens(5)
                .setRegex("(a)\\1").build();
        GenerateRequest plain = TestRequests.request("plain", 3);
        KAFKA.kafka().produce(job.requests, List.of(constrained, invalid, plain));

        Configuration conf = job.config();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        JobClient client = job.start(conf, 1);
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses,
                c -> c.resultCount() >= 2 && !c.errors.isEmpty(), TIMEOUT);
        JobStatus status = client.getJobStatus().get();
        cancel(client);

        assertThat(status).isEqualTo(JobStatus.RUNNING);
        String text = out.results.get("json").get(0).getText();
        com.fasterxml.jackson.databind.JsonNode value = new com.fasterxml.jackson.databind.ObjectMapper().readTree(text);
        assertThat(value.get("city").isTextual()).as(text).isTrue();
        assertThat(value.get("population").isIntegralNumber()).as(text).isTrue();
        assertThat(value.size()).as(text).isEqualTo(2);
        assertThat(out.results.get("json").get(0).getFinishReason()).isEqualTo("stop");
        assertThat(out.results).containsKey("plain");
        assertThat(out.errors).singleElement().satisfies(e -> {
            assertThat(e.getRequestId()).isEqualTo("bad-regex");
            assertThat(e.getCode()).isEqualTo(400);
            assertThat(e.getMessage()).startsWith("regex: unsupported").contains("\\1");
        });
    }

    @Test
    void aRequestThatMakesTheEngineThrowGetsA500WhileTheOthersCompleteAndTheTaskNeverRestarts() throws Exception {
        Path model = tmp.resolve("poisoned");
        RandomModel.write(model, 7);
        Job job = new Job("poisoned", CpuLlamaEngineFactory.poisoned(model));
        Scenario scenario = Scenario.start(job.name);
        List<GenerateRequest> good = TestRequests.requests("good", 6);
        GenerateRequest poison = TestRequests.request(CpuLlamaEngineFactory.POISON + "-1", 3);
        List<GenerateRequest> all = new ArrayList<>(good.subList(0, 3));
        all.add(poison);
        all.addAll(good.subList(3, good.size()));
        KAFKA.kafka().produce(job.requests, all);

        Configuration conf = job.config();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none"); // a task failure would fail the job
        JobClient client = job.start(conf, 1);
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses,
                c -> c.resultCount() >= good.size() && !c.errors.isEmpty(), TIMEOUT);
        JobStatus status = client.getJobStatus().get();
        cancel(client);

        assertThat(status).isEqualTo(JobStatus.RUNNING);
        assertThat(scenario.engines()).as("engines built: none was rebuilt by a restart").isEqualTo(1);
        try (GenerationEngine reference = llama("poisoned-reference").create("cpu", 0)) {
            out.assertComplete(good, TestRequests.reference(good, reference));
        }
        assertThat(out.errors).singleElement().satisfies(e -> {
            assertThat(e.getRequestId()).isEqualTo(poison.getRequestId());
            assertThat(e.getCode()).isEqualTo(500);
            assertThat(e.getMessage()).contains("injected fault sampling");
        });
    }

    /**
     * Requests naming two LoRA adapters (one device slot: they take turns), the base model, and an adapter the job does
     * not serve: the unknown one gets a 400 naming it while the job runs on, and after a task failure injected
     * mid-generation every other request's committed tokens equal an uninterrupted run's, so a request restored from
     * its checkpoint continued with its adapter. The same prompt and seed under each adapter and the base model give
     * three different outputs. {@code send --adapter} reaches the job.
     */
    @Test
    void requestsKeepTheirAdapterThroughARestoreAndAnUnknownAdapterGetsA400() throws Exception {
        Path adapters = tmp.resolve("lora-adapters");
        RandomPeftAdapters.write(adapters, RandomModel.CONFIG, new RandomPeftAdapters.Spec("support", 8, 16, false,
                List.of("q_proj", "v_proj", "o_proj", "down_proj")), 31);
        RandomPeftAdapters.write(adapters, RandomModel.CONFIG, new RandomPeftAdapters.Spec("legal", 4, 8, true,
                List.of("k_proj", "gate_proj", "up_proj")), 32);
        LlamaEngineFactory llama = llama("random-lora", conf -> {
            conf.set(LlamaEngineOptions.ADAPTERS_DIR, adapters.toString());
            conf.set(LlamaEngineOptions.ADAPTER_SLOTS, 1);
        });
        List<GenerateRequest> good = new ArrayList<>();
        for (int k = 0; k < 4; k++) {
            for (String adapter : Arrays.asList("support", "legal", null)) {
                GenerateRequest r = TestRequests.request((adapter == null ? "base" : adapter) + "-" + k, 10 + k);
                r.setSeed(100L + k);
                r.setIgnoreEos(true);
                r.setAdapter(adapter);
                good.add(r);
            }
        }
        GenerateRequest unknown = TestRequests.request("unknown-0", 3);
        unknown.setAdapter("medical");
        List<GenerateRequest> all = new ArrayList<>(good);
        all.add(2, unknown);
        Map<String, List<Integer>> expected;
        try (GenerationEngine reference = llama.create("cpu", 0)) {
            expected = TestRequests.reference(good, reference);
        }
        Job job = new Job("lora", llama);
        Scenario scenario = Scenario.start(job.name);
        scenario.pauseAfterTokens(60);
        KAFKA.kafka().produce(job.requests, all);

        JobClient client = startAndFailMidGeneration(job, scenario, 1);
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses,
                c -> c.resultCount() >= good.size() && !c.errors.isEmpty(), TIMEOUT);
        StringWriter sendErr = new StringWriter();
        int sent = Mstar.commandLine().setOut(new PrintWriter(new StringWriter())).setErr(new PrintWriter(sendErr))
                .execute("send", "--bootstrap-servers", KAFKA.broker().bootstrapServers(), "--requests-topic",
                        job.requests, "--responses-topic", job.responses, "--timeout", "60", "--adapter", "medical",
                        "hello");
        JobStatus status = client.getJobStatus().get();
        cancel(client);

        out.assertComplete(good, expected);
        assertThat(status).isEqualTo(JobStatus.RUNNING);
        assertThat(scenario.resumedMidGeneration()).as("requests resumed from a checkpoint mid-generation").isPositive();
        assertThat(out.errors).singleElement().satisfies(e -> {
            assertThat(e.getRequestId()).isEqualTo("unknown-0");
            assertThat(e.getCode()).isEqualTo(400);
            assertThat(e.getMessage()).isEqualTo("adapter: unknown adapter 'medical'; this engine serves legal, support");
        });
        for (int k = 0; k < 4; k++) {
            assertThat(Set.of(expected.get("support-" + k), expected.get("legal-" + k), expected.get("base-" + k)))
                    .as("prompt %d under each adapter and the base model", k).hasSize(3);
        }
        assertThat(sent).as("send's exit code; stderr:%n%s", sendErr).isEqualTo(1);
        assertThat(sendErr.toString()).contains("error 400: adapter: unknown adapter 'medical'");
    }

    @Test
    void aRequestIdReusedAfterItsRequestCompletedGetsA409AndNoSecondGeneration() throws Exception {
        Job job = new Job("reused", 2, Duration.ZERO);
        GenerateRequest first = TestRequests.request("reused-id", 4);
        KAFKA.kafka().produce(job.requests, List.of(first));
        JobClient client = job.start(job.config(), 2);
        KAFKA.kafka().readUntil(job.responses, c -> c.resultCount() >= 1, TIMEOUT);

        GenerateRequest again = GenerateRequest.newBuilder(first).setPrompt("another prompt, same id").build();
        GenerateRequest fresh = TestRequests.request("fresh-id", 5);
        KAFKA.kafka().produce(job.requests, List.of(again, fresh));
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses,
                c -> c.results.containsKey("fresh-id") && !c.errors.isEmpty(), TIMEOUT);
        cancel(client);

        out.assertComplete(List.of(first, fresh));
        assertThat(out.errors).singleElement().satisfies(e -> {
            assertThat(e.getRequestId()).isEqualTo("reused-id");
            assertThat(e.getCode()).isEqualTo(409);
            assertThat(e.getMessage()).contains("already taken", "new id");
        });
    }

    /**
     * Starts {@code job} (restarting on failure) and, once every token before the scenario's pause is committed (a
     * checkpoint then holds the requests mid-generation), fails its next step and lets it go on from the checkpoint.
     */
    private static JobClient startAndFailMidGeneration(Job job, Scenario scenario, int parallelism) throws Exception {
        Configuration conf = job.config();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofMillis(100));
        JobClient client = job.start(conf, parallelism);
        long generated = scenario.awaitPausedByTokens(TIMEOUT);
        KAFKA.kafka().readUntil(job.responses, c -> c.tokenCount() >= generated, TIMEOUT);
        scenario.failNextStep();
        scenario.unpause();
        scenario.awaitFailures(1, TIMEOUT);
        return client;
    }


    /** The real engine on a small random Llama written under {@code folder}. */
    private LlamaEngineFactory llama(String folder) throws Exception {
        return llama(folder, conf -> {});
    }

    /** {@link #llama(String)} with the engine options {@code options} sets. */
    private LlamaEngineFactory llama(String folder, Consumer<Configuration> options) throws Exception {
        Path model = tmp.resolve(folder);
        RandomModel.write(model, 7);
        Configuration engineConf = new Configuration();
        engineConf.set(GenerateOptions.MODEL_DIR, model.toString());
        engineConf.set(LlamaEngineOptions.MAX_BATCH_ROWS, 4);
        options.accept(engineConf);
        return new LlamaEngineFactory(engineConf);
    }

    /** The default factory over a copy of the {@code arch} fixture ("mamba2" or "bamba") under {@code folder}. */
    private LlamaEngineFactory hybrid(String arch, String folder) throws Exception {
        Configuration engineConf = new Configuration();
        engineConf.set(GenerateOptions.MODEL_DIR, TinyHybrid.copyTo(arch, tmp.resolve(folder)).toString());
        engineConf.set(LlamaEngineOptions.MAX_BATCH_ROWS, 4);
        return new LlamaEngineFactory(engineConf);
    }

    private static Map.Entry<String, byte[]> bad(String id, Consumer<GenerateRequest> change)
            throws Exception {
        GenerateRequest r = TestRequests.request(id, 5);
        change.accept(r);
        return Map.entry(id, KafkaTestSupport.bytes(r));
    }

    /** One test's topics, transactional ids and fake engine. */
    private final class Job {
        final String name;
        final String requests;
        final String responses;
        final EngineFactory engine;

        Job(String name, int maxRunning, Duration stepTime) throws Exception {
            this(name, new FakeEngineFactory(maxRunning, stepTime));
        }

        Job(String name, EngineFactory engine) throws Exception {
            this.name = name;
            this.requests = name + "-requests";
            this.responses = name + "-responses";
            this.engine = new ScenarioEngineFactory(name, engine);
            KAFKA.broker().createTopics(4, requests, responses);
        }

        Configuration config() {
            Configuration conf = new Configuration();
            conf.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
            conf.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, true);
            conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, tmp.resolve("checkpoints").toUri().toString());
            conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(100));
            conf.set(GenerateOptions.DEVICE, "cpu");
            return conf;
        }

        JobClient start(Configuration conf, int parallelism) throws Exception {
            return start(conf, parallelism, DeliveryGuarantee.EXACTLY_ONCE);
        }

        JobClient start(Configuration conf, int parallelism, DeliveryGuarantee guarantee) throws Exception {
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
            env.setParallelism(parallelism);
            GenerationPipeline.builder()
                    .bootstrapServers(KAFKA.broker().bootstrapServers())
                    .requestsTopic(requests)
                    .responsesTopic(responses)
                    .groupId(name)
                    .transactionalIdPrefix("tx-" + name)
                    .deliveryGuarantee(guarantee)
                    .engineFactory(engine)
                    .build()
                    .addTo(env);
            return env.executeAsync("mstar " + name);
        }
    }
}
