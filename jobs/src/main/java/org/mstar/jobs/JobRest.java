package org.mstar.jobs;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MetricOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.WebOptions;

/**
 * One job of the local cluster as its REST API shows it: its vertices, a subtask's metrics and the checkpoint
 * statistics. A benchmark reads it before and after a row, never during one.
 */
final class JobRest {
    /** Checkpoints the statistics keep: a row at one checkpoint every 100 ms for ten minutes. */
    private static final int CHECKPOINT_HISTORY = 6000;
    private static final long FRESH_WITHIN_NANOS = TimeUnit.SECONDS.toNanos(10);

    private final ClusterRest rest;
    private final String jobPath;

    JobRest(String restUrl, String jobId) {
        this.rest = new ClusterRest(() -> restUrl, Duration.ofSeconds(10));
        this.jobPath = "/jobs/" + jobId;
    }

    /**
     * Makes {@code conf}'s local cluster answer on a free port of this host, keep every checkpoint of a row in its
     * statistics, and serve statistics and metrics as of the request (by default checkpoint statistics are cached for
     * 3 s and metrics fetched every 10 s).
     *
     * @return the REST endpoint's URL
     */
    static String expose(Configuration conf) throws IOException {
        // a port the system just gave out, not the first free of Flink's range: builds beside this one start clusters
        // on that range too, and one could take it between the probe and the bind
        conf.set(RestOptions.BIND_ADDRESS, "127.0.0.1");
        conf.set(RestOptions.BIND_PORT, Integer.toString(EmbeddedKafkaBroker.freePort()));
        conf.set(WebOptions.CHECKPOINTS_HISTORY_SIZE, CHECKPOINT_HISTORY);
        conf.set(RestOptions.CACHE_CHECKPOINT_STATISTICS_TIMEOUT, Duration.ZERO);
        conf.set(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL, Duration.ofMillis(1));
        return ServeJob.restUrl(conf);
    }

    /** {@code path} under the job's URL, as JSON. */
    JsonNode get(String path) throws IOException, InterruptedException {
        return rest.get(jobPath + path);
    }

    /** {@code path} under the job's URL, as JSON; empty while the API does not know it (yet). */
    Optional<JsonNode> find(String path) throws IOException, InterruptedException {
        return rest.find(jobPath + path);
    }

    /** The job's vertices: id by name, in the job graph's order. */
    Map<String, String> vertices() throws IOException, InterruptedException {
        Map<String, String> ids = new LinkedHashMap<>();
        for (JsonNode v : get("").path("vertices")) {
            ids.put(v.path("name").asText(), v.path("id").asText());
        }
        return ids;
    }

    /** A read of metrics; empty while what it looks for is not among them. */
    interface MetricsRead<T> {
        Optional<T> attempt() throws IOException, InterruptedException;
    }

    /**
     * Repeats {@code read} until it finds what it looks for. The REST API answers with the metrics its fetcher
     * collected before the request, and starts the next collection: an answer can be as old as the previous request.
     *
     * @param what what {@code read} looks for, for the exception when it does not find it within 10 s
     */
    static <T> T awaitMetrics(MetricsRead<T> read, String what) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + FRESH_WITHIN_NANOS;
        while (true) {
            Optional<T> found = read.attempt();
            if (found.isPresent()) {
                return found.get();
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the job's metrics did not show " + what + " within 10 s");
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20)); // the fetcher collects asynchronously
        }
    }

    /** The ids of every metric subtask 0 of vertex {@code vertexId} has. */
    List<String> metricIds(String vertexId) throws IOException, InterruptedException {
        List<String> ids = new ArrayList<>();
        get("/vertices/" + vertexId + "/subtasks/0/metrics").forEach(m -> ids.add(m.path("id").asText()));
        return ids;
    }

    /**
     * The metrics {@code names} of subtask 0 of vertex {@code vertexId}, as the metric fetcher last collected them
     * (a request also starts the next collection); a metric not (yet) registered is absent.
     */
    Map<String, Double> metrics(String vertexId, List<String> names) throws IOException, InterruptedException {
        Map<String, Double> values = new LinkedHashMap<>();
        for (JsonNode m : get("/vertices/" + vertexId + "/subtasks/0/metrics?get=" + String.join(",", names))) {
            values.put(m.path("id").asText(), m.path("value").asDouble());
        }
        return values;
    }
}
