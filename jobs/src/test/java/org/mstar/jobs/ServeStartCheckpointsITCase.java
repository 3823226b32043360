package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
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
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.jobs.chaos.MstarProcess;

/**
 * A fresh {@code mstar serve} shows no failed checkpoint, also when its engines take seconds to build: Flink fails
 * every checkpoint it triggers while a task is not yet RUNNING, and a task used to run only once its engine was built.
 * The engines here take {@link SlowStartEngineFactory#BUILD_TIME}, longer than the checkpoint interval, so a
 * checkpoint falls into their build on every run.
 */
class ServeStartCheckpointsITCase {
    private static final Duration TIMEOUT = Duration.ofSeconds(120);
    /**
     * Shorter than the engines' build, so that before the fix, which built them in the task's start, the first
     * checkpoint (at most one interval after the job started) always fell into it; and longer than Flink takes to
     * start the tasks on a busy machine (seen: 5.6 s at a load of 17 on two cores), so that after it the first
     * checkpoint comes after that.
     */
    private static final int CHECKPOINT_SECONDS = 10;
    private static final int CHECKPOINTS = 2;

    @RegisterExtension
    static final KafkaBrokerExtension KAFKA = new KafkaBrokerExtension();

    @TempDir
    Path tmp;
    private MstarProcess serve;

    @AfterEach
    void stopServeAndShowItsLog() throws Exception {
        if (serve != null) {
            serve.kill();
            System.out.println("==== serve log\n" + Files.readString(serve.log()));
        }
    }

    @Test
    void aFreshStartWhoseEnginesBuildSlowlyShowsNoFailedCheckpoint() throws Exception {
        Path model = tmp.resolve("model");
        RandomModel.writeBundledGeometry(model, 5);
        KAFKA.broker().createTopics(2, "start-requests", "start-responses");
        serve = MstarProcess.start(tmp.resolve("serve.log"), List.of("serve",
                "--bootstrap-servers", KAFKA.broker().bootstrapServers(),
                "--requests-topic", "start-requests",
                "--responses-topic", "start-responses",
                "--model", model.toString(),
                "--device", "cpu",
                "--engine-factory", SlowStartEngineFactory.class.getName(),
                "--state-dir", tmp.resolve("state").toString(),
                "--checkpoint-interval", Integer.toString(CHECKPOINT_SECONDS),
                "-Dparallelism.default=2",
                "-Drest.bind-port=" + freePort(),
                "-Dio.tmp.dirs=" + Files.createDirectories(tmp.resolve("io"))));

        serve.awaitLine("is running", TIMEOUT);
        String console = Files.readString(serve.log());
        String beforeRunning = console.substring(0, console.indexOf("is running"));
        assertThat(beforeRunning.split(SlowStartEngineFactory.BUILT, -1)).as("both engines built before serve says"
                + " it runs").hasSize(3);

        JsonNode checkpoints = awaitCompletedCheckpoints(restUrl(console));
        assertThat(checkpoints.path("counts").path("completed").asInt()).isGreaterThanOrEqualTo(CHECKPOINTS);
        assertThat(checkpoints.path("counts").path("failed").asInt()).as("failed checkpoints; history: %s",
                checkpoints.path("history")).isZero();
        long firstTriggered = Long.MAX_VALUE;
        for (JsonNode c : checkpoints.path("history")) {
            firstTriggered = Math.min(firstTriggered, c.path("trigger_timestamp").asLong());
        }
        assertThat(firstTriggered).as("a checkpoint was triggered while the engines were built")
                .isLessThan(lastBuilt(console));
    }

    /** When the last engine was built (epoch ms), as the factory wrote it. */
    private static long lastBuilt(String console) {
        Matcher m = Pattern.compile(SlowStartEngineFactory.BUILT + " at (\\d+)").matcher(console);
        long last = 0;
        while (m.find()) {
            last = Math.max(last, Long.parseLong(m.group(1)));
        }
        return last;
    }

    /**
     * A port free now that the system chose: serve's own choice, the first free one from 8081, races with every other
     * serve started on the machine meanwhile.
     */
    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return socket.getLocalPort();
        }
    }

    /** The REST address the running line names. */
    private static String restUrl(String console) {
        Matcher m = Pattern.compile("REST and metrics (http://[0-9.]+:[0-9]+)").matcher(console);
        assertThat(m.find()).as("the running line names the REST address:%n%s", console).isTrue();
        return m.group(1);
    }

    /** The job's checkpoint statistics once {@link #CHECKPOINTS} checkpoints completed. */
    private JsonNode awaitCompletedCheckpoints(String restUrl) throws Exception {
        HttpClient http = HttpClient.newHttpClient();
        ObjectMapper json = new ObjectMapper();
        String jobId = json.readTree(get(http, restUrl + "/jobs")).path("jobs").get(0).path("id").asText();
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (true) {
            JsonNode checkpoints = json.readTree(get(http, restUrl + "/jobs/" + jobId + "/checkpoints"));
            if (checkpoints.path("counts").path("completed").asInt() >= CHECKPOINTS || System.nanoTime() > deadline) {
                return checkpoints;
            }
            assertThat(serve.isAlive()).as("serve is running").isTrue();
            TimeUnit.MILLISECONDS.sleep(200); // poll interval of a condition with a deadline
        }
    }

    private static String get(HttpClient http, String url) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString()).body();
    }
}
