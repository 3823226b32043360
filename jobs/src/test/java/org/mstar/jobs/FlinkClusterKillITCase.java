package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
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
import org.mstar.flink.DisaggregationOptions;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.LlamaEngineFactory;
import org.mstar.flink.LlamaEngineOptions;
import org.mstar.flink.TestRequests;
import org.mstar.schemas.GenerateRequest;

/**
 * The job jar on a real Flink session cluster: a JobManager and two TaskManagers, each its own JVM, started by
 * {@code scripts/cluster/cluster.sh} from Flink's entry points, the jar submitted with Flink's CLI. While requests
 * stream, a TaskManager that runs a generate subtask is killed with SIGKILL, a replacement joins, and later a
 * TaskManager that runs one then is killed too; in a second cluster the JobManager is killed and the same command
 * submitted again; in a third, with ZooKeeper high availability, the leading JobManager is killed and the standby
 * takes the job over. A read_committed consumer must see every request's complete token stream and one result exactly
 * once, identical to the engine's uninterrupted output, and the consumer group's offsets must reach the broker.
 *
 * <p>The test paces itself, so that each kill lands mid-generation on a slow machine and on a fast one: requests
 * arrive in waves, and a kill waits until the committed output shows a request of the current wave with tokens but
 * no result while at most half of the wave has finished. A wave that finishes before that is followed by one twice
 * as large. Nothing of a later wave exists before the kill, so the job cannot finish early. The output read before
 * a kill can be a checkpoint behind the job, so a kill can still land after the wave's last tokens were committed:
 * then the killed process starts again, the job restores, and a larger wave is tried (the HA test excepted).
 *
 * <p>Tagged {@code cluster}: it needs the shaded job jar, which {@code package} builds after the tests, so the
 * default build leaves it out; {@code scripts/cluster/kill-taskmanager-test.sh} builds the jar and runs it.
 */
@Tag("cluster")
class FlinkClusterKillITCase {
    private static final Duration TIMEOUT = Duration.ofSeconds(240);
    private static final int MAX_BATCH_ROWS = 4;
    /** Requests of the first wave; each wave the job outpaces is followed by one twice as large. */
    private static final int FIRST_WAVE = 8;
    private static final int MAX_WAVES = 6;
    /** Kills tried for one that lands mid-generation (see killTaskManagerMidGeneration). */
    private static final int MAX_KILLS = 3;

    @TempDir
    static Path tmp;
    private static EmbeddedKafkaBroker broker;
    private static KafkaTestSupport kafka;
    private static Path model;
    private static LlamaEngineFactory engines;
    private FlinkSessionCluster cluster;
    private final List<String> notes = new ArrayList<>();
    private int taskManagerKills;

    @BeforeAll
    static void startBrokerAndWriteTheModel() throws Exception {
        broker = EmbeddedKafkaBroker.start();
        kafka = new KafkaTestSupport(broker.bootstrapServers());
        model = tmp.resolve("model");
        RandomModel.writeBundledGeometry(model, 13);
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, model.toString());
        conf.set(LlamaEngineOptions.MAX_BATCH_ROWS, MAX_BATCH_ROWS);
        engines = new LlamaEngineFactory(conf);
    }

    @AfterAll
    static void stopBroker() throws Exception {
        broker.close();
    }

    /** Each test starts its cluster ({@code cluster.sh start} or {@code start-ha}) here, on ports of its own. */
    @BeforeEach
    void placeCluster(TestInfo test) throws Exception {
        cluster = new FlinkSessionCluster(repoRoot(),
                tmp.resolve("cluster-" + test.getTestMethod().orElseThrow().getName()));
    }

    /**
     * Stops the cluster; prints what happened to the test's output (surefire's *-output.txt): the test's notes and
     * the JobManager's log lines about job state changes and lost TaskManagers.
     */
    @AfterEach
    void stopCluster() throws Exception {
        cluster.script("stop");
        notes.forEach(System.out::println);
        for (Path file : cluster.jobManagerLogs()) {
            System.out.println("--- " + file.getFileName());
            List<String> log = Files.readAllLines(file);
            log.stream().filter(l -> l.contains("Job mstar serve") && l.contains("switched from state")
                    || l.contains("Closing TaskExecutor connection") || l.contains("granted leadership"))
                    .forEach(System.out::println);
            // The last task failure and its cause, when there was one.
            for (int i = log.size() - 1; i >= 0; i--) {
                if (log.get(i).contains(" to FAILED")) {
                    log.subList(i, Math.min(log.size(), i + 40)).forEach(System.out::println);
                    break;
                }
            }
        }
    }

    @Test
    void killedTaskManagersLoseAndRepeatNothing() throws Exception {
        cluster.script("start", "2");
        Job job = new Job("tm", "--parallelism", "2");
        String jobId = job.submit();

        String first = killTaskManagerMidGeneration(job, jobId);
        cluster.script("start-taskmanager", first);
        cluster.awaitRestarts(jobId, taskManagerKills, TIMEOUT);

        killTaskManagerMidGeneration(job, jobId); // the other one's two slots carry on

        job.assertExactlyOnceAndComplete();
        cluster.awaitRestarts(jobId, taskManagerKills, TIMEOUT);
    }

    /**
     * Disaggregated, the KV handed off by ticket over TCP between TaskManagers ({@code
     * mstar.disaggregation.network-handoff}), the decode operator in a slot sharing group of its own and one slot per
     * TaskManager, so prefill and decode run in different TaskManagers. The one running prefill is killed while a wave
     * is mid-generation, its KV server with it: tickets in flight are replayed from the checkpoint and their prompts
     * prefilled again, and a ticket whose bytes are gone is recomputed by the decode side. A replacement joins, then
     * the one running decode is killed. The committed output must be the uninterrupted engine's, exactly once.
     */
    @Test
    void networkHandOffsLoseAndRepeatNothingWhenThePrefillThenTheDecodeTaskManagerDies() throws Exception {
        cluster.set("MSTAR_TM_SLOTS", "1");
        cluster.script("start", "2");
        Job job = new Job("net", "--parallelism", "1", "--disaggregated", "--prefill-parallelism", "1", "--decode-parallelism", "1",
                "-D" + DisaggregationOptions.NETWORK_HANDOFF.key() + "=true",
                "-D" + DisaggregationOptions.NETWORK_HANDOFF_HOST.key() + "=127.0.0.1",
                "-D" + DisaggregationOptions.DECODE_SLOT_SHARING_GROUP.key() + "=decode");
        String jobId = job.submit();
        assertThat(cluster.taskManagerRunning(jobId, "mstar prefill", TIMEOUT)).as("the prefill side's TaskManager")
                .isNotEqualTo(cluster.taskManagerRunning(jobId, "mstar decode", TIMEOUT));

        String prefill = killTaskManagerMidGeneration(job, jobId, "mstar prefill");
        cluster.script("start-taskmanager", prefill);
        cluster.awaitRestarts(jobId, taskManagerKills, TIMEOUT);

        String decode = killTaskManagerMidGeneration(job, jobId, "mstar decode");
        cluster.script("start-taskmanager", decode);
        job.assertExactlyOnceAndComplete();

        // the KV went over TCP (not every hand-off recomputed): the decode side logs each pull and each recompute
        long pulled = 0;
        long recomputed = 0;
        for (Path file : cluster.taskManagerLogs()) {
            for (String line : Files.readAllLines(file)) {
                pulled += line.contains("Pulled KV bytes") && line.contains("over TCP") ? 1 : 0;
                recomputed += line.contains("Hand-off KV not pulled") ? 1 : 0;
            }
        }
        notes.add("network hand-offs: " + pulled + " pulled over TCP, " + recomputed + " recomputed");
        assertThat(pulled).as("hand-offs whose KV was pulled over TCP").isPositive();
    }

    /**
     * Kills a TaskManager that runs a generate subtask once the committed output shows the latest wave
     * mid-generation, and returns its number. The output read before the kill can be a checkpoint behind the job, so
     * the wave's last tokens may still be committed after it (a checkpoint that completed just before the kill); then
     * this kill proved nothing: the TaskManager starts again, the job restores, and a new wave is tried.
     */
    private String killTaskManagerMidGeneration(Job job, String jobId) throws Exception {
        return killTaskManagerMidGeneration(job, jobId, "mstar generate");
    }

    /** As {@link #killTaskManagerMidGeneration(Job, String)}, for the TaskManager running vertex {@code vertex}. */
    private String killTaskManagerMidGeneration(Job job, String jobId, String vertex) throws Exception {
        for (int attempt = 0; attempt < MAX_KILLS; attempt++) {
            String number = cluster.taskManagerRunning(jobId, vertex, TIMEOUT);
            job.produceUntilMidGeneration();
            killAtOnce("taskmanager-" + number, "TaskManager " + number + ", which ran " + vertex + ",");
            taskManagerKills++;
            if (job.killedMidGeneration("TaskManager " + number + " died")) {
                return number;
            }
            cluster.script("start-taskmanager", number);
            cluster.awaitRestarts(jobId, taskManagerKills, TIMEOUT);
        }
        throw new AssertionError("no TaskManager kill of " + MAX_KILLS + " landed mid-generation");
    }

    /**
     * A session cluster without high availability forgets its jobs when the JobManager dies; resubmitting the same
     * command resumes from the latest checkpoint in the state directory, which the restarted job finds on its own.
     */
    @Test
    void aResubmittedJobResumesAfterTheJobManagerDied() throws Exception {
        cluster.script("start", "2");
        Job job = new Job("jm", "--parallelism", "2");
        String first = job.submit();
        String resubmitted;
        boolean landed;
        int kills = 0;
        do { // a kill that came after the wave was committed is tried again, as with TaskManagers
            assertThat(kills++).as("JobManager kills before one landed mid-generation").isLessThan(MAX_KILLS);
            job.produceUntilMidGeneration();
            killAtOnce("jobmanager", "the JobManager");
            landed = job.killedMidGeneration("the JobManager died");
            cluster.script("start-jobmanager", "2");
            resubmitted = job.submit();
        } while (!landed);

        assertThat(resubmitted).isNotEqualTo(first);
        assertThat(job.submitOutput).contains("Resuming from checkpoint");
        job.assertExactlyOnceAndComplete();
    }

    /**
     * With ZooKeeper high availability, two JobManagers: the leader dies mid-generation, the standby wins the election,
     * recovers the job (same id) from the latest checkpoint ZooKeeper points to, and it runs to the end; nothing is
     * submitted again.
     */
    @Test
    void aStandbyJobManagerTakesOverWhenTheLeaderDies() throws Exception {
        cluster.script("start-ha", "2");
        Job job = new Job("ha", "--parallelism", "2");
        String jobId = job.submit();
        int leader = leadingJobManager();

        job.produceUntilMidGeneration();
        killAtOnce("jobmanager-" + leader, "the leading JobManager " + leader);
        job.assertKilledMidGeneration("the leading JobManager " + leader + " died");
        if (leader == 1) {
            cluster.useJobManager2(); // the standby's REST endpoint from now on
        }
        cluster.awaitRunning(jobId, TIMEOUT); // the standby runs the job under its id

        job.assertExactlyOnceAndComplete();
        assertThat(Files.readString(cluster.dir().resolve("log/jobmanager-" + (3 - leader) + ".log")))
                .as("the standby's log").contains("granted leadership");
    }

    /** Which of the two JobManagers leads: the one whose log says its dispatcher was granted leadership. */
    private int leadingJobManager() throws IOException {
        for (int n = 1; n <= 2; n++) {
            if (Files.readString(cluster.dir().resolve("log/jobmanager-" + n + ".log")).contains("granted leadership")) {
                return n;
            }
        }
        throw new AssertionError("neither JobManager's log says it leads");
    }

    /** One test's topics, consumer group, transactional ids, state directory, and the requests sent so far. */
    private final class Job {
        final String name;
        /** Arguments of {@code serve} past the common ones. */
        final List<String> serveArgs;
        final String requestsTopic;
        final String responses;
        final List<GenerateRequest> requests = new ArrayList<>();
        final Map<String, List<Integer>> expected = new java.util.LinkedHashMap<>();
        /** The requests of the latest wave. */
        List<GenerateRequest> wave = List.of();
        int nextWaveSize = FIRST_WAVE;
        String submitOutput = "";

        Job(String name, String... serveArgs) throws Exception {
            this.name = name;
            this.serveArgs = List.of(serveArgs);
            this.requestsTopic = name + "-requests";
            this.responses = name + "-responses";
            broker.createTopics(4, requestsTopic, responses);
        }

        /** {@code flink run -d jobs.jar serve ...}, the same command every time; returns the job id. */
        String submit() throws Exception {
            List<String> run = new ArrayList<>(List.of("run", "-d", FlinkSessionCluster.jobJar(repoRoot()).toString(),
                    "serve", "--bootstrap-servers", broker.bootstrapServers(),
                    "--requests-topic", requestsTopic, "--responses-topic", responses,
                    "--group-id", name, "--transactional-id-prefix", "tx-" + name,
                    "--model", model.toString(), "--device", "cpu",
                    "--state-dir", tmp.resolve("state-" + name).toString(),
                    "-Dexecution.checkpointing.interval=500 ms",
                    "-D" + LlamaEngineOptions.MAX_BATCH_ROWS.key() + "=" + MAX_BATCH_ROWS));
            run.addAll(serveArgs);
            submitOutput = cluster.script(run.toArray(String[]::new));
            submitOutput.lines().filter(l -> l.contains("checkpoint") || l.contains("JobID")).forEach(notes::add);
            Matcher id = Pattern.compile("JobID ([0-9a-f]{32})").matcher(submitOutput);
            assertThat(id.find()).as("flink run output:%n%s", submitOutput).isTrue();
            return id.group(1);
        }

        /**
         * Sends waves of requests until the committed output shows one of the latest wave mid-generation (tokens, no
         * result) with at most half of that wave finished: then a kill lands while the wave is being generated. A
         * wave the job finishes first is followed by one twice as large.
         */
        void produceUntilMidGeneration() throws Exception {
            for (int attempt = 0; attempt < MAX_WAVES; attempt++) {
                sendWave();
                Set<String> ids = wave.stream().map(GenerateRequest::getRequestId).collect(Collectors.toSet());
                TestRequests.Collected seen = kafka.readUntil(responses,
                        c -> midGeneration(c, ids) || finished(c, ids) > ids.size() / 2, TIMEOUT);
                if (midGeneration(seen, ids) && finished(seen, ids) <= ids.size() / 2) {
                    return;
                }
                notes.add(String.format("the job finished %d of a wave of %d before one was seen mid-generation;"
                        + " the next wave is twice as large", finished(seen, ids), ids.size()));
                nextWaveSize *= 2;
            }
            throw new AssertionError("no wave was seen mid-generation in " + MAX_WAVES + " waves");
        }

        private void sendWave() throws Exception {
            int first = requests.size();
            wave = new ArrayList<>();
            for (int i = first; i < first + nextWaveSize; i++) {
                wave.add(TestRequests.request(name + "-" + i, i));
            }
            try (GenerationEngine engine = engines.create("cpu", 0)) {
                expected.putAll(TestRequests.reference(wave, engine));
            }
            requests.addAll(wave);
            kafka.produce(requestsTopic, wave);
        }

        /** After a kill: the committed output, which the restore starts from, holds requests mid-generation. */
        void assertKilledMidGeneration(String when) throws IOException {
            assertThat(killedMidGeneration(when)).as("requests mid-generation when %s", when).isTrue();
        }

        /** Whether the committed output after a kill, which the restore starts from, holds requests mid-generation. */
        boolean killedMidGeneration(String when) throws IOException {
            TestRequests.Collected seen = kafka.readAll(responses);
            Set<String> ids = wave.stream().map(GenerateRequest::getRequestId).collect(Collectors.toSet());
            long partial = ids.stream().filter(id -> partial(seen, id)).count();
            notes.add(String.format("%s: %d of %d requests sent have their result committed, %d of the latest wave"
                    + " of %d have tokens but no result", when, seen.resultCount(), requests.size(), partial,
                    ids.size()));
            if (partial == 0) {
                nextWaveSize *= 2; // the job outpaced this wave
            }
            return partial > 0;
        }

        void assertExactlyOnceAndComplete() throws Exception {
            Set<String> ids = requests.stream().map(GenerateRequest::getRequestId).collect(Collectors.toSet());
            TestRequests.Collected out = kafka.readUntil(responses,
                    c -> c.results.keySet().containsAll(ids) || !c.errors.isEmpty(), TIMEOUT);
            out.assertComplete(requests, expected);
            assertThat(out.errors).isEmpty();
            awaitOffsetsCommitted(name, requestsTopic);
            int expectedTokens = expected.values().stream().mapToInt(List::size).sum();
            assertThat(kafka.readAll(responses).tokenCount()).as("tokens once all is committed")
                    .isEqualTo(expectedTokens);
        }
    }

    private static boolean partial(TestRequests.Collected c, String id) {
        return c.tokens.containsKey(id) && !c.results.containsKey(id);
    }

    private static boolean midGeneration(TestRequests.Collected c, Set<String> ids) {
        return ids.stream().anyMatch(id -> partial(c, id));
    }

    private static long finished(TestRequests.Collected c, Set<String> ids) {
        return ids.stream().filter(c.results::containsKey).count();
    }

    /**
     * SIGKILLs cluster process {@code name} at once, not through {@code cluster.sh}: what the test saw mid-generation
     * must still be the latest checkpoint when it dies.
     */
    private void killAtOnce(String name, String what) throws Exception {
        cluster.kill(name);
        notes.add("killed " + what);
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

    private static Path repoRoot() {
        return Path.of(System.getProperty("basedir", System.getProperty("user.dir"))).toAbsolutePath().getParent();
    }
}
