package org.mstar.jobs.chaos;

import java.io.IOException;
import java.time.Duration;
import java.util.OptionalInt;
import com.fasterxml.jackson.databind.JsonNode;
import org.mstar.jobs.ClusterRest;

/** The few questions a chaos run asks a JobManager's REST API. */
final class FlinkRest {
    private final ClusterRest rest;

    /** @param url the REST endpoint, e.g. {@code http://127.0.0.1:8081} */
    FlinkRest(String url) {
        this.rest = new ClusterRest(() -> url, Duration.ofSeconds(5));
    }

    /**
     * How many task failures the JobManager recorded at or after {@code sinceMillis} in the job that runs now (its
     * exception history, as the web UI shows it; a region failover restarts tasks without counting a job restart);
     * empty when no job runs or the JobManager does not answer (frozen, dead or starting).
     */
    OptionalInt failuresSince(long sinceMillis) throws InterruptedException {
        try {
            for (JsonNode job : get("/jobs/overview").path("jobs")) {
                if (!job.path("state").asText().equals("RUNNING")) {
                    continue;
                }
                int failures = 0;
                JsonNode history = get("/jobs/" + job.path("jid").asText() + "/exceptions").path("exceptionHistory");
                for (JsonNode failure : history.path("entries")) {
                    if (failure.path("timestamp").asLong() >= sinceMillis) {
                        failures++;
                    }
                }
                return OptionalInt.of(failures);
            }
        } catch (IOException unreachable) {
            return OptionalInt.empty();
        }
        return OptionalInt.empty();
    }

    private JsonNode get(String path) throws IOException, InterruptedException {
        return rest.get(path);
    }
}
