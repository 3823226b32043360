package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.flink.configuration.Configuration;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.engine.GenerationEngine;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.LlamaEngineFactory;
import org.mstar.flink.LlamaEngineOptions;
import org.mstar.flink.TestRequests;
import org.mstar.schemas.GenerateRequest;

/**
 * The job jar on a real Flink session cluster: a JobManager and two TaskManagers, each its own JVM, started by
 * {@code scripts/cluster/cluster.sh} from Flink's entry points, the jar submitted with Flink's CLI. While requests
 * stream, TaskManager 1 is killed with SIGKILL, a replacement joins and later TaskManager 2 is killed too; in a
 * second cluster the JobManager is killed and the same command submitted again. A read_committed consumer must
 * see every request's complete token stream and one result exactly once, identical to the engine's
 * uninterrupted output, and the consumer group's offsets must reach the broker.
 *
 * <p>Tagged {@code cluster}: it needs the shaded job jar, which {@code package} builds after the tests, so the
 * default build leaves it out; {@code scripts/cluster/kill-taskmanager-test.sh} builds the jar and runs it.
 */
@Tag("cluster")
class FlinkClusterKillITCase {
    private static final Duration TIMEOUT = Duration.ofSeconds(240);
    private static final int MAX_BATCH_ROWS = 4;

    @TempDir
    static Path tmp;
    private static EmbeddedKafkaBroker broker;
    private static KafkaTestSupport kafka;
    private static Path model;
    private static List<GenerateRequest> requests;
    private static Map<String, List<Integer>> expected;
    private static int expectedTokens;
    private Path clusterDir;
    private final List<String> notes = new ArrayList<>();
    private int restPort;
    private int rpcPort;

    @BeforeAll
    static void startBrokerAndComputeTheUninterruptedRun() throws Exception {
        broker = EmbeddedKafkaBroker.start();
        kafka = new KafkaTestSupport(broker.bootstrapServers());
        model = tmp.resolve("model");
        RandomModel.writeBundledGeometry(model, 13);
        requests = TestRequests.requests("tm", 30);
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, model.toString());
        conf.set(LlamaEngineOptions.MAX_BATCH_ROWS, MAX_BATCH_ROWS);
        try (GenerationEngine engine = new LlamaEngineFactory(conf).create("cpu", 0)) {
            expected = TestRequests.reference(requests, engine);
        }
        expectedTokens = expected.values().stream().mapToInt(List::size).sum();
    }

    @AfterAll
    static void stopBroker() throws Exception {
        broker.close();
    }

    @BeforeEach
    void startCluster(TestInfo test) throws Exception {
        clusterDir = tmp.resolve("cluster-" + test.getTestMethod().orElseThrow().getName());
        restPort = freePort();
        rpcPort = freePort();
        cluster("start", "2");
    }

    /**
     * Stops the cluster; prints what happened to the test's output (surefire's *-output.txt): the test's notes and
     * the JobManager's log lines about job state changes and lost TaskManagers.
     */
    @AfterEach
    void stopCluster() throws Exception {
        cluster("stop");
        notes.forEach(System.out::println);
        try (Stream<String> lines = Files.lines(clusterDir.resolve("log/jobmanager.log"))) {
            lines.filter(l -> l.contains("Job mstar serve") && l.contains("switched from state")
                    || l.contains("Closing TaskExecutor connection")).forEach(System.out::println);
        }
        // The last task failure and its cause, when there was one.
        List<String> log = Files.readAllLines(clusterDir.resolve("log/jobmanager.log"));
        for (int i = log.size() - 1; i >= 0; i--) {
            if (log.get(i).contains(" to FAILED")) {
                log.subList(i, Math.min(log.size(), i + 40)).forEach(System.out::println);
                break;
            }
        }
    }

    @Test
    void killedTaskManagersLoseAndRepeatNothing() throws Exception {
        Job job = new Job("tm");
        String jobId = job.submit();

        kafka.readUntil(job.responses, c -> c.tokenCount() >= expectedTokens / 3, TIMEOUT);
        cluster("kill-taskmanager", "1");
        job.assertMidGeneration("TaskManager 1 died");
        cluster("start-taskmanager", "1");
        awaitRestarts(jobId, 1);

        kafka.readUntil(job.responses, c -> c.tokenCount() >= expectedTokens * 2 / 3, TIMEOUT);
        cluster("kill-taskmanager", "2");
        job.assertMidGeneration("TaskManager 2 died");

        job.assertExactlyOnceAndComplete();
        awaitRestarts(jobId, 2);
    }

    /**
     * A session cluster without high availability forgets its jobs when the JobManager dies; resubmitting the same
     * command resumes from the latest checkpoint in the state directory, which the restarted job finds on its own.
     */
    @Test
    void aResubmittedJobResumesAfterTheJobManagerDied() throws Exception {
        Job job = new Job("jm");
        String first = job.submit();

        kafka.readUntil(job.responses, c -> c.tokenCount() >= expectedTokens / 2, TIMEOUT);
        cluster("kill-jobmanager");
        job.assertMidGeneration("the JobManager died");
        cluster("start-jobmanager", "2");
        String second = job.submit();

        assertThat(second).isNotEqualTo(first);
        assertThat(job.submitOutput).contains("Resuming from checkpoint");
        job.assertExactlyOnceAndComplete();
    }

    /** One test's topics, consumer group, transactional ids and state directory. */
    private final class Job {
        final String name;
        final String requestsTopic;
        final String responses;
        String submitOutput = "";

        Job(String name) throws Exception {
            this.name = name;
            this.requestsTopic = name + "-requests";
            this.responses = name + "-responses";
            broker.createTopics(4, requestsTopic, responses);
            kafka.produce(requestsTopic, requests);
        }

        /** {@code flink run -d jobs.jar serve ...}, the same command every time; returns the job id. */
        String submit() throws Exception {
            submitOutput = cluster("run", "-d", jobJar().toString(), "serve",
                    "--bootstrap-servers", broker.bootstrapServers(),
                    "--requests-topic", requestsTopic, "--responses-topic", responses,
                    "--group-id", name, "--transactional-id-prefix", "tx-" + name,
                    "--model", model.toString(), "--device", "cpu", "--parallelism", "2",
                    "--state-dir", tmp.resolve("state-" + name).toString(),
                    "-Dexecution.checkpointing.interval=500 ms",
                    "-D" + LlamaEngineOptions.MAX_BATCH_ROWS.key() + "=" + MAX_BATCH_ROWS);
            submitOutput.lines().filter(l -> l.contains("checkpoint") || l.contains("JobID")).forEach(notes::add);
            Matcher id = Pattern.compile("JobID ([0-9a-f]{32})").matcher(submitOutput);
            assertThat(id.find()).as("flink run output:%n%s", submitOutput).isTrue();
            return id.group(1);
        }

        void assertMidGeneration(String when) throws IOException {
            TestRequests.Collected seen = kafka.readAll(responses);
            notes.add(String.format("%s: %d of %d tokens and %d of %d results committed", when, seen.tokenCount(),
                    expectedTokens, seen.resultCount(), requests.size()));
            assertThat(seen.resultCount()).as("results when %s", when).isLessThan(requests.size());
        }

        void assertExactlyOnceAndComplete() throws Exception {
            Set<String> ids = requests.stream().map(GenerateRequest::getRequestId).collect(Collectors.toSet());
            TestRequests.Collected out = kafka.readUntil(responses,
                    c -> c.results.keySet().containsAll(ids) || !c.errors.isEmpty(), TIMEOUT);
            out.assertComplete(requests, expected);
            assertThat(out.errors).isEmpty();
            awaitOffsetsCommitted(name, requestsTopic);
            assertThat(kafka.readAll(responses).tokenCount()).as("tokens once all is committed")
                    .isEqualTo(expectedTokens);
        }
    }

    /** Polls the JobManager's REST API until the job has restarted {@code count} times. */
    private void awaitRestarts(String jobId, int count) throws Exception {
        HttpClient http = HttpClient.newHttpClient();
        Pattern restarts = Pattern.compile("\"value\":\"?(\\d+)");
        URI uri = URI.create("http://localhost:" + restPort + "/jobs/" + jobId + "/metrics?get=numRestarts");
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        String last = "";
        while (System.nanoTime() < deadline) {
            last = http.send(HttpRequest.newBuilder(uri).build(), HttpResponse.BodyHandlers.ofString()).body();
            Matcher m = restarts.matcher(last);
            if (m.find() && Integer.parseInt(m.group(1)) >= count) {
                return;
            }
            TimeUnit.MILLISECONDS.sleep(200); // poll interval of a condition with a deadline
        }
        throw new AssertionError("job " + jobId + " did not restart " + count + " times: " + last);
    }

    /** The group's committed offsets reach the end of the requests topic once a checkpoint follows the last read. */
    private static void awaitOffsetsCommitted(String group, String topic) throws Exception {
        Map<TopicPartition, Long> ends = kafka.endOffsets(topic);
        try (Admin admin = broker.admin()) {
            long deadline = System.nanoTime() + TIMEOUT.toNanos();
            Map<TopicPartition, Long> committed = Map.of();
            while (System.nanoTime() < deadline && !committed.equals(ends)) {
                committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                        .entrySet().stream().filter(e -> e.getValue() != null)
                        .collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().offset()));
                TimeUnit.MILLISECONDS.sleep(100); // poll interval of a condition with a deadline
            }
            assertThat(committed).as("offsets of group %s on the broker", group).isEqualTo(ends);
        }
    }

    /** Runs {@code cluster.sh ARGS}; returns its output, failing with it when the script fails. */
    private String cluster(String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of("bash", repoRoot().resolve("scripts/cluster/cluster.sh").toString()));
        command.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
        pb.environment().put("MSTAR_CLUSTER_DIR", clusterDir.toString());
        pb.environment().put("MSTAR_REST_PORT", Integer.toString(restPort));
        pb.environment().put("MSTAR_RPC_PORT", Integer.toString(rpcPort));
        pb.environment().put("OPT_OUT_TRACKING", "true");
        Process p = pb.start();
        String output = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor()).as("cluster.sh %s:%n%s", String.join(" ", args), output).isZero();
        return output;
    }

    private static Path repoRoot() {
        return Path.of(System.getProperty("basedir", System.getProperty("user.dir"))).toAbsolutePath().getParent();
    }

    /** The shaded job jar {@code package} writes (not the original-*.jar it replaces). */
    private static Path jobJar() throws IOException {
        try (Stream<Path> files = Files.list(repoRoot().resolve("jobs/target"))) {
            return files.filter(f -> f.getFileName().toString().matches("mstar-jobs-.*\\.jar"))
                    .findFirst().orElseThrow(() -> new AssertionError("no jobs/target/mstar-jobs-*.jar: run `mvn"
                            + " -pl jobs -am package -DskipTests` first (kill-taskmanager-test.sh does)"));
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
            return s.getLocalPort();
        }
    }
}
