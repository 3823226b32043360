package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import org.apache.flink.api.common.JobID;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.execution.ExecutionState;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.InjectMiniCluster;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.flink.FakeEngineFactory;
import org.mstar.flink.GenerationPipeline;
import org.mstar.flink.TestRequests;
import org.mstar.schemas.GenerateRequest;

/**
 * The Kafka broker stopped mid-generation for longer than the job's Kafka client timeouts, then started again on its
 * data: the job fails over while the broker is away and, once it is back, a read_committed consumer sees every
 * request's token stream and result exactly once. The clients' timeouts are shortened (as {@code -Dmstar.kafka.*}
 * would) so that the outage outlasts them within seconds; Flink's default restart strategy is left as serve has it.
 */
class BrokerOutageITCase {
    private static final Duration TIMEOUT = Duration.ofSeconds(60);
    private static final Set<ExecutionState> DEPLOYED =
            EnumSet.of(ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING);
    /**
     * How long a client may wait for the broker, per request and per blocking call (a record: twice that). Much
     * shorter and a loaded machine times out with the broker up.
     */
    private static final int CLIENT_TIMEOUT_MS = 3000;

    @RegisterExtension
    static final MiniClusterExtension FLINK = new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
            .setNumberTaskManagers(1).setNumberSlotsPerTaskManager(2).build());

    @TempDir
    Path tmp;

    @Test
    void aStoppedBrokerBackAfterTheClientTimeoutsLosesAndRepeatsNothing(@InjectMiniCluster MiniCluster cluster)
            throws Exception {
        List<GenerateRequest> requests = TestRequests.requests("outage", 24);
        int port = EmbeddedKafkaBroker.freePort();
        Path data = tmp.resolve("kafka");
        EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start(data, port);
        KafkaTestSupport kafka = new KafkaTestSupport(broker.bootstrapServers());
        broker.createTopics(2, "outage-requests", "outage-responses");
        kafka.produce("outage-requests", requests);
        JobClient job = start(broker.bootstrapServers());
        try {
            TestRequests.Collected before = kafka.readUntil("outage-responses", c -> c.resultCount() >= 4, TIMEOUT);
            int attempt = latestAttempt(cluster, job.getJobID());
            long stoppedAt = System.currentTimeMillis();
            long stopped = System.nanoTime();
            broker.close();
            awaitFailureAfter(cluster, job.getJobID(), stoppedAt);
            long noticed = System.nanoTime();
            awaitRedeployedAfter(cluster, job.getJobID(), attempt);
            broker = EmbeddedKafkaBroker.start(data, port);
            long restarted = System.nanoTime();

            TestRequests.Collected out = kafka.readUntil("outage-responses",
                    c -> c.resultCount() >= requests.size() || !c.errors.isEmpty(), TIMEOUT);
            long recovered = System.nanoTime();
            System.out.printf("broker outage: %d of %d results committed before it; the job failed %.1f s after the"
                            + " broker began to stop and was redeployed, the broker down %.1f s in all; every result"
                            + " committed %.1f s after it was back (last failure: %s)%n", before.resultCount(),
                    requests.size(), seconds(noticed - stopped), seconds(restarted - stopped),
                    seconds(recovered - restarted), lastFailure(cluster, job.getJobID()));
            assertThat(before.resultCount()).as("results before the outage: it came mid-generation")
                    .isLessThan(requests.size());
            out.assertComplete(requests);
            assertThat(out.errors).isEmpty();
        } finally {
            job.cancel().get();
            broker.close();
        }
    }

    private JobClient start(String bootstrapServers) throws Exception {
        Configuration conf = new Configuration();
        conf.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, tmp.resolve("checkpoints").toUri().toString());
        conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(200));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        String timeout = Integer.toString(CLIENT_TIMEOUT_MS);
        GenerationPipeline.builder()
                .bootstrapServers(bootstrapServers)
                .requestsTopic("outage-requests")
                .responsesTopic("outage-responses")
                .groupId("outage")
                .transactionalIdPrefix("tx-outage")
                .engineFactory(new FakeEngineFactory(2, Duration.ofMillis(40)))
                .kafkaProperty("request.timeout.ms", timeout)
                .kafkaProperty("delivery.timeout.ms", Integer.toString(2 * CLIENT_TIMEOUT_MS))
                .kafkaProperty("max.block.ms", timeout)
                .kafkaProperty("default.api.timeout.ms", timeout)
                .build()
                .addTo(env);
        return env.executeAsync("broker outage");
    }

    /** Waits until the job fails after {@code afterMillis}: a client timed out while the broker was away. */
    private static void awaitFailureAfter(MiniCluster cluster, JobID job, long afterMillis) throws Exception {
        await("the job failed while the broker was away", () -> {
            var failure = cluster.getExecutionGraph(job).get().getFailureInfo();
            return failure != null && failure.getTimestamp() > afterMillis;
        });
    }

    /**
     * Waits until every task of the job is deployed again in an attempt after {@code attempt}: the failed attempt's
     * writers have closed without the broker, and the TaskManager survived that.
     */
    private static void awaitRedeployedAfter(MiniCluster cluster, JobID job, int attempt) throws Exception {
        await("every task deployed again", () -> {
            for (var vertex : cluster.getExecutionGraph(job).get().getAllExecutionVertices()) {
                var current = vertex.getCurrentExecutionAttempt();
                if (current.getAttemptNumber() <= attempt || !DEPLOYED.contains(current.getState())) {
                    return false;
                }
            }
            return true;
        });
    }

    private static int latestAttempt(MiniCluster cluster, JobID job) throws Exception {
        int latest = 0;
        for (var vertex : cluster.getExecutionGraph(job).get().getAllExecutionVertices()) {
            latest = Math.max(latest, vertex.getCurrentExecutionAttempt().getAttemptNumber());
        }
        return latest;
    }

    private static void await(String what, Callable<Boolean> condition) throws Exception {
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (!condition.call()) {
            assertThat(System.nanoTime()).as(what).isLessThan(deadline);
            TimeUnit.MILLISECONDS.sleep(50); // poll interval of a condition with a deadline
        }
    }

    private static String lastFailure(MiniCluster cluster, JobID job) throws Exception {
        var failure = cluster.getExecutionGraph(job).get().getFailureInfo();
        return failure == null ? "none" : failure.getExceptionAsString().lines().findFirst().orElse("");
    }

    private static double seconds(long nanos) {
        return nanos / 1e9;
    }
}
