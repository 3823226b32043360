package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.ToIntFunction;
import java.util.stream.Collectors;
import org.apache.flink.configuration.Configuration;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.engine.GenerationEngine;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.LlamaEngineFactory;
import org.mstar.flink.LlamaEngineOptions;
import org.mstar.flink.TestRequests;
import org.mstar.jobs.chaos.MstarProcess;
import org.mstar.schemas.GenerateRequest;

/**
 * {@code mstar serve} as a user runs it: the real command line in a child JVM against this test's Kafka broker,
 * killed with SIGKILL twice mid-generation and started again with the same command. Each rerun must resume from
 * the latest checkpoint on its own, and a read_committed consumer must then see every request's complete token
 * stream and result exactly once (at-least-once: every token, repeats only as exact duplicates), identical to
 * what the engine generates without interruption. The requests' consumer group offsets must reach the broker, and
 * the first run's console must tell the model's weights loading.
 */
class ServeProcessKillITCase {
    private static final Duration TIMEOUT = Duration.ofSeconds(180);
    private static final int MAX_BATCH_ROWS = 4;

    @TempDir
    static Path shared;
    @RegisterExtension
    static final KafkaBrokerExtension KAFKA = new KafkaBrokerExtension();
    private static Path model;
    private static List<GenerateRequest> requests;
    private static Map<String, List<Integer>> expected;
    private static int expectedTokens;

    @TempDir
    Path tmp;
    private final List<MstarProcess> children = new ArrayList<>();

    @BeforeAll
    static void computeTheUninterruptedRun() throws Exception {
        model = shared.resolve("model");
        RandomModel.writeBundledGeometry(model, 11);
        requests = TestRequests.requests("kill", 24);
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, model.toString());
        conf.set(LlamaEngineOptions.MAX_BATCH_ROWS, MAX_BATCH_ROWS);
        try (GenerationEngine engine = new LlamaEngineFactory(conf).create("cpu", 0)) {
            expected = TestRequests.reference(requests, engine);
        }
        expectedTokens = expected.values().stream().mapToInt(List::size).sum();
    }

    /** Kills what is left and copies each serve log to the test's output (surefire's *-output.txt). */
    @AfterEach
    void killChildrenAndShowTheirLogs() throws Exception {
        for (MstarProcess p : children) {
            p.kill();
        }
        try (var logs = Files.list(tmp)) {
            for (Path log : logs.filter(f -> f.getFileName().toString().endsWith(".log")).sorted().toList()) {
                System.out.println("==== " + log.getFileName() + "\n" + Files.readString(log));
            }
        }
    }

    @Test
    void exactlyOnceSurvivesTwoKillsWithIdenticalOutput() throws Exception {
        Run run = new Run("eo", "EXACTLY_ONCE");
        TestRequests.Collected out = run.killTwiceThenFinish(TestRequests.Collected::tokenCount);

        out.assertComplete(requests, expected);
        assertThat(out.errors).isEmpty();
    }

    @Test
    void atLeastOnceSurvivesTwoKillsRepeatingOnlyExactDuplicates() throws Exception {
        Run run = new Run("alo", "AT_LEAST_ONCE");
        TestRequests.Collected raw = run.killTwiceThenFinish(ServeProcessKillITCase::distinctTokens);

        KafkaTestSupport.firstOfEach(raw).assertComplete(requests, expected);
        assertThat(raw.errors).isEmpty();
    }

    /** One test's topics, state directory and serve processes. */
    private final class Run {
        final String name;
        final String delivery;
        final String requestsTopic;
        final String responsesTopic;
        final Path stateDir;

        Run(String name, String delivery) throws Exception {
            this.name = name;
            this.delivery = delivery;
            this.requestsTopic = name + "-requests";
            this.responsesTopic = name + "-responses";
            this.stateDir = tmp.resolve("state");
            KAFKA.broker().createTopics(4, requestsTopic, responsesTopic);
        }

        /**
         * Sends two thirds of the requests, kills serve once a third of all tokens is visible, sends the rest,
         * reruns it and kills it at two thirds, reruns it once more and reads until every result is there.
         */
        TestRequests.Collected killTwiceThenFinish(ToIntFunction<TestRequests.Collected> visible)
                throws Exception {
            int firstBatch = requests.size() * 2 / 3;
            KAFKA.kafka().produce(requestsTopic, requests.subList(0, firstBatch));

            Path log1 = serve(1);
            awaitVisibleTokens(visible, expectedTokens / 3);
            kill(log1);
            TestRequests.Collected atKill = readAll();
            System.out.printf("%s: first kill at %d of %d tokens visible, %d of %d results%n", name,
                    visible.applyAsInt(atKill), expectedTokens, atKill.results.size(), requests.size());
            assertThat(atKill.results.size()).as("results visible after the first kill: it was mid-generation")
                    .isLessThan(firstBatch);
            assertThat(committedOffsets()).as("offsets of group %s on the broker: the first run committed what it"
                    + " had read (all sent so far) before it died", name).isEqualTo(KAFKA.kafka().endOffsets(requestsTopic));
            KAFKA.kafka().produce(requestsTopic, requests.subList(firstBatch, requests.size()));

            Path log2 = serve(2);
            awaitVisibleTokens(visible, expectedTokens * 2 / 3);
            kill(log2);
            assertThat(Files.readString(log2)).contains("Resuming from checkpoint");
            atKill = readAll();
            System.out.printf("%s: second kill at %d of %d tokens visible, %d of %d results%n", name,
                    visible.applyAsInt(atKill), expectedTokens, atKill.results.size(), requests.size());
            assertThat(atKill.results.keySet()).as("results visible after the second kill").hasSizeLessThan(
                    requests.size());

            Path log3 = serve(3);
            Set<String> ids = requests.stream().map(GenerateRequest::getRequestId).collect(Collectors.toSet());
            TestRequests.Collected out = KAFKA.kafka().readUntil(responsesTopic,
                    c -> c.results.keySet().containsAll(ids) || c.errors.size() > 0, TIMEOUT);
            assertThat(Files.readString(log3)).contains("Resuming from checkpoint");
            awaitOffsetsCommittedOnTheBroker();
            System.out.printf("%s: %d token events read (%d distinct), %d results, offsets on the broker: %s%n", name,
                    out.tokenCount(), distinctTokens(out), out.resultCount(), KAFKA.kafka().endOffsets(requestsTopic));
            try (var folders = Files.walk(stateDir.resolve(StateDirectory.CHECKPOINTS), 2)) {
                System.out.println(name + ": checkpoint folders at the end: " + folders.filter(Files::isDirectory)
                        .map(f -> stateDir.resolve(StateDirectory.CHECKPOINTS).relativize(f).toString()).sorted()
                        .toList());
            }
            for (Path log : List.of(log1, log2, log3)) {
                assertThat(Files.readString(log)).as("%s", log.getFileName())
                        .doesNotContain(" ERROR ").doesNotContain("data loss");
            }
            assertLoadingShown(log1);
            return out;
        }

        /** Starts {@code mstar serve} in a child JVM; its output goes to the returned log file. */
        Path serve(int attempt) throws IOException {
            Path log = tmp.resolve("serve-" + attempt + ".log");
            children.add(MstarProcess.start(log, List.of("serve",
                    "--bootstrap-servers", KAFKA.broker().bootstrapServers(),
                    "--requests-topic", requestsTopic,
                    "--responses-topic", responsesTopic,
                    "--group-id", name,
                    "--transactional-id-prefix", "tx-" + name,
                    "--delivery", delivery,
                    "--model", model.toString(),
                    "--device", "cpu",
                    "--state-dir", stateDir.toString(),
                    "-Dexecution.checkpointing.interval=200 ms",
                    "-Dparallelism.default=2",
                    "-D" + LlamaEngineOptions.MAX_BATCH_ROWS.key() + "=" + MAX_BATCH_ROWS,
                    "-Dio.tmp.dirs=" + Files.createDirectories(tmp.resolve("io-" + attempt)))));
            return log;
        }

        /** SIGKILL (destroyForcibly on Linux): no shutdown hook, no final checkpoint, no cleanup. */
        void kill(Path log) throws Exception {
            MstarProcess p = children.get(children.size() - 1);
            assertThat(p.isAlive()).as("serve still running; its log:%n%s", Files.readString(log)).isTrue();
            p.kill();
        }

        void awaitVisibleTokens(ToIntFunction<TestRequests.Collected> visible, int count)
                throws Exception {
            KAFKA.kafka().readUntil(responsesTopic, c -> visible.applyAsInt(c) >= count || !children.get(children.size() - 1)
                    .isAlive(), TIMEOUT);
        }

        TestRequests.Collected readAll() throws IOException {
            return KAFKA.kafka().readAll(responsesTopic);
        }

        /**
         * The group's committed offsets on the broker reach the end of the requests topic (as it is now) once a
         * checkpoint follows the last read.
         */
        void awaitOffsetsCommittedOnTheBroker() throws Exception {
            Map<TopicPartition, Long> ends = KAFKA.kafka().endOffsets(requestsTopic);
            long deadline = System.nanoTime() + TIMEOUT.toNanos();
            Map<TopicPartition, Long> committed = committedOffsets();
            while (!committed.equals(ends) && System.nanoTime() < deadline) {
                TimeUnit.MILLISECONDS.sleep(100); // poll interval of a condition with a deadline
                committed = committedOffsets();
            }
            assertThat(committed).as("offsets of group %s on the broker", name).isEqualTo(ends);
        }

        /** The group's committed offsets as the broker reports them ({@code kafka-consumer-groups --describe}). */
        Map<TopicPartition, Long> committedOffsets() throws Exception {
            try (Admin admin = KAFKA.broker().admin()) {
                Map<TopicPartition, OffsetAndMetadata> offsets =
                        admin.listConsumerGroupOffsets(name).partitionsToOffsetAndMetadata().get();
                return offsets.entrySet().stream().filter(e -> e.getValue() != null)
                        .collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().offset()));
            }
        }
    }

    /**
     * A serve run's console tells the load of the model's weights, once for the device its subtasks share, before
     * the engines are built on them.
     */
    private static void assertLoadingShown(Path log) throws IOException {
        List<String> lines = Files.readAllLines(log);
        int loading = indexOf(lines, "Loading the weights of " + model + " on cpu");
        int loaded = indexOf(lines, "Loaded the weights of " + model + " on cpu in ");
        int engine = indexOf(lines, "Engine of subtask");
        assertThat(loading).as("%s: the loading line", log.getFileName()).isNotNegative();
        assertThat(loaded).isGreaterThan(loading).isLessThan(engine);
        assertThat(lines.stream().filter(l -> l.contains("the weights of"))).hasSize(2);
    }

    private static int indexOf(List<String> lines, String text) {
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).contains(text)) {
                return i;
            }
        }
        return -1;
    }

    private static int distinctTokens(TestRequests.Collected c) {
        Set<String> seen = new HashSet<>();
        c.tokens.forEach((id, events) -> events.forEach(e -> seen.add(id + "/" + e.getIndex())));
        return seen.size();
    }
}
