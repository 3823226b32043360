package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.jobs.CancelledJobs.cancel;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.engine.EngineRole;
import org.mstar.engine.GenerationEngine;
import org.mstar.flink.DisaggregationOptions;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import org.mstar.flink.LlamaEngineFactory;
import org.mstar.flink.LlamaEngineOptions;
import org.mstar.flink.ScenarioEngineFactory;
import org.mstar.flink.ScenarioEngineFactory.Scenario;
import org.mstar.flink.TestRequests;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.TokenEvent;

/**
 * Disaggregated serving on a Flink MiniCluster (RocksDB state) between topics of an in-process Kafka broker, with
 * the Llama engine on a small random model: prefill and decode operators at different parallelism, hand-offs split
 * into several records each, generate token for token what one colocated engine does (sampled requests, prompts
 * sharing prefixes), also when either side fails along the way; with the hand-off's KV in the records, and by
 * handle (both sides on the CPU of one TaskManager: the prefill engine lends its pages, a record carries a ticket).
 */
class DisaggregatedPipelineITCase {
    private static final Duration TIMEOUT = Duration.ofSeconds(90);
    /** A 16-token page of the test model's KV is 8 KiB: most hand-offs take several records. */
    private static final MemorySize RECORD_SIZE = MemorySize.parse("3kb");

    @RegisterExtension
    static final MiniClusterExtension FLINK = new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
            .setNumberTaskManagers(1).setNumberSlotsPerTaskManager(4).build());

    @RegisterExtension
    static final KafkaBrokerExtension KAFKA = new KafkaBrokerExtension();

    @TempDir
    Path tmp;

    /** Text prompts (sharing their first words) and token-id prompts sharing two or three whole pages. */
    private static List<GenerateRequest> requests(String prefix, int count, int from) {
        List<GenerateRequest> out = new ArrayList<>();
        for (int i = from; i < from + count; i++) {
            GenerateRequest r = TestRequests.request(prefix + "-" + i, i);
            if (i % 2 == 1) {
                List<Integer> ids = new ArrayList<>();
                int shared = i % 4 == 1 ? 32 : 48;
                for (int t = 0; t < shared; t++) {
                    ids.add(2 + (t * 37) % 300);
                }
                for (int t = 0; t < 3 + i % 5; t++) {
                    ids.add(2 + (i * 11 + t * 13) % 300);
                }
                r.setPrompt(null);
                r.setPromptTokenIds(ids);
            }
            out.add(r);
        }
        return out;
    }

    /** Hand-offs as records of KV pages, or (one device, one TaskManager) by handle. */
    @ParameterizedTest(name = "by handle: {0}")
    @ValueSource(booleans = {false, true})
    void prefillAndDecodeOperatorsGenerateWhatOneColocatedEngineDoes(boolean byHandle) throws Exception {
        Job job = new Job(byHandle ? "split-handle" : "split", byHandle);
        List<GenerateRequest> requests = requests(job.name, 16, 0);
        Map<String, List<Integer>> expected = job.colocatedReference(requests);
        KAFKA.kafka().produce(job.requests, requests);

        JobClient client = job.start(job.config());
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses, c -> c.resultCount() >= requests.size(), TIMEOUT);
        cancel(client);

        inIndexOrder(out).assertComplete(requests, expected);
        assertThat(out.errors).isEmpty();
        assertThat(job.decode.engines()).as("decode engines: one subtask, never restarted").isEqualTo(1);
    }

    @ParameterizedTest(name = "by handle: {0}")
    @ValueSource(booleans = {false, true})
    void failuresOnEitherSideLeaveTheCommittedOutputUnchanged(boolean byHandle) throws Exception {
        Job job = new Job(byHandle ? "split-fail-handle" : "split-fail", byHandle);
        List<GenerateRequest> first = requests(job.name, 8, 0);
        List<GenerateRequest> second = requests(job.name, 6, 8);
        List<GenerateRequest> third = requests(job.name, 10, 14);
        List<GenerateRequest> fourth = requests(job.name, 6, 24);
        List<GenerateRequest> all = new ArrayList<>();
        List.of(first, second, third, fourth).forEach(all::addAll);
        Map<String, List<Integer>> expected = job.colocatedReference(all);

        Configuration conf = job.config();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 6);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofMillis(100));
        job.decode.pauseAfterTokens(25);
        JobClient client = job.start(conf);
        KAFKA.kafka().produce(job.requests, first);
        // decode fails mid-generation: once every token before its pause is committed, a checkpoint holds
        // requests it imported and had generated for
        long decoded = job.decode.awaitPausedByTokens(TIMEOUT);
        KAFKA.kafka().readUntil(job.responses, c -> c.tokenCount() >= decoded + first.size(), TIMEOUT);
        job.decode.failNextStep();
        job.decode.unpause();
        job.decode.awaitFailures(1, TIMEOUT);
        int done = first.size();
        KAFKA.kafka().readUntil(job.responses, c -> c.resultCount() >= done, TIMEOUT);
        // prefill fails on the first step of new requests, before it sends their hand-offs
        job.prefill.failNextStep();
        KAFKA.kafka().produce(job.requests, second);
        job.prefill.awaitFailures(1, TIMEOUT);
        int done2 = done + second.size();
        KAFKA.kafka().readUntil(job.responses, c -> c.resultCount() >= done2, TIMEOUT);
        // prefill fails on the step after one that sent hand-offs: their records are in flight or partly received
        job.prefill.failAfterNextHandoff();
        KAFKA.kafka().produce(job.requests, third);
        job.prefill.awaitFailures(2, TIMEOUT);
        int done3 = done2 + third.size();
        KAFKA.kafka().readUntil(job.responses, c -> c.resultCount() >= done3, TIMEOUT);
        // decode fails with a hand-off's records all in its keyed state but not yet applied
        job.decode.failNextReceive();
        KAFKA.kafka().produce(job.requests, fourth);
        job.decode.awaitFailures(2, TIMEOUT);
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses, c -> c.resultCount() >= all.size(), TIMEOUT);
        cancel(client);

        inIndexOrder(out).assertComplete(all, expected);
        assertThat(out.errors).isEmpty();
        assertThat(job.decode.resumedMidGeneration()).as("decode requests resumed from a checkpoint").isPositive();
        assertThat(job.prefill.engines()).as("prefill engines: two subtasks, rebuilt after each restart")
                .isEqualTo(2 * 5);
    }

    /**
     * The committed events of each request sorted by index: a request's first token comes from the prefill operator
     * and the rest from the decode operator, two paths into the sink, so only the indexes order them.
     */
    private static TestRequests.Collected inIndexOrder(TestRequests.Collected raw) {
        TestRequests.Collected sorted = new TestRequests.Collected();
        raw.tokens.forEach((id, events) -> {
            List<TokenEvent> copy = new ArrayList<>(events);
            copy.sort(Comparator.comparingInt(TokenEvent::getIndex));
            sorted.tokens.put(id, copy);
        });
        sorted.results.putAll(raw.results);
        sorted.errors.addAll(raw.errors);
        return sorted;
    }

    /** One test's topics, model and the scenarios of its two sides. */
    private final class Job {
        final String name;
        final String requests;
        final String responses;
        final Configuration engineConf = new Configuration();
        final Scenario prefill;
        final Scenario decode;

        Job(String name, boolean byHandle) throws Exception {
            this.name = name;
            this.requests = name + "-requests";
            this.responses = name + "-responses";
            KAFKA.broker().createTopics(4, requests, responses);
            Path model = tmp.resolve("model");
            RandomModel.write(model, 7);
            engineConf.set(GenerateOptions.MODEL_DIR, model.toString());
            engineConf.set(LlamaEngineOptions.MAX_BATCH_ROWS, 4);
            engineConf.set(DisaggregationOptions.SAME_DEVICE_HANDOFF, byHandle);
            prefill = Scenario.start(name + "-prefill");
            decode = Scenario.start(name + "-decode");
        }

        Map<String, List<Integer>> colocatedReference(List<GenerateRequest> requests) throws Exception {
            try (GenerationEngine reference = new LlamaEngineFactory(engineConf).create("cpu", 0)) {
                return TestRequests.reference(requests, reference);
            }
        }

        private LlamaEngineFactory side(EngineRole role) {
            Configuration c = new Configuration(engineConf);
            c.set(DisaggregationOptions.ENGINE_ROLE, role);
            return new LlamaEngineFactory(c);
        }

        Configuration config() {
            Configuration conf = new Configuration();
            conf.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
            conf.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, true);
            conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, tmp.resolve("checkpoints").toUri().toString());
            conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(100));
            conf.set(GenerateOptions.DEVICE, "cpu");
            conf.set(DisaggregationOptions.PREFILL_PARALLELISM, 2);
            conf.set(DisaggregationOptions.DECODE_PARALLELISM, 1);
            conf.set(DisaggregationOptions.HANDOFF_RECORD_SIZE, RECORD_SIZE);
            return conf;
        }

        JobClient start(Configuration conf) throws Exception {
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
            env.setParallelism(2);
            GenerationPipeline.builder()
                    .configure(conf)
                    .bootstrapServers(KAFKA.broker().bootstrapServers())
                    .requestsTopic(requests)
                    .responsesTopic(responses)
                    .groupId(name)
                    .transactionalIdPrefix("tx-" + name)
                    .disaggregated(true)
                    .prefillEngineFactory(new ScenarioEngineFactory(name + "-prefill", side(EngineRole.PREFILL)))
                    .decodeEngineFactory(new ScenarioEngineFactory(name + "-decode", side(EngineRole.DECODE)))
                    .build()
                    .addTo(env);
            return env.executeAsync("mstar " + name);
        }
    }
}
