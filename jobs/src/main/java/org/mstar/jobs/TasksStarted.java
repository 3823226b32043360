package org.mstar.jobs;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.NullNode;
import java.io.IOException;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.mstar.flink.GenerationPipeline;

/**
 * Waits until a job on the local cluster serves: every task runs and every engine is built, so the model is loaded.
 * A job is RUNNING as soon as its tasks are deployed, and a task runs while its engine is still being built (see
 * {@link GenerationPipeline#ENGINE_STARTED_METRIC}); a model that cannot be loaded fails the job after that, and
 * serve would say "is running" before saying why it stopped.
 */
final class TasksStarted {
    /** How a vertex's metric reads in the REST API: operator name, then the metric's groups and name. */
    private static final String ENGINE_METRIC_SUFFIX = ".mstar." + GenerationPipeline.ENGINE_STARTED_METRIC;

    private final JobRest rest;

    private TasksStarted(String restUrl, String jobId) {
        this.rest = new JobRest(restUrl, jobId);
    }

    /**
     * Polls {@code restUrl}'s job details and metrics until all the job's vertices run and each of its
     * {@code engineOperators} operators that build an engine has started it in every subtask.
     *
     * @param ended the job's result: when it completes first, its failure is thrown
     * @throws Exception the job's failure, when it ends before it serves
     */
    static void await(String restUrl, String jobId, int engineOperators, CompletableFuture<?> ended)
            throws Exception {
        TasksStarted started = new TasksStarted(restUrl, jobId);
        boolean answered = false;
        while (true) {
            if (ended.isDone()) {
                ended.get();
                return;
            }
            try {
                if (started.serves(engineOperators)) {
                    return;
                }
                answered = true;
            } catch (IOException unreachable) {
                if (!answered) {
                    return; // no REST endpoint to ask (a range given with -D): the job's RUNNING has to do
                }
                // it answered before: the local cluster is going away with a failed job (its result follows), or
                // was slow once; ask again rather than say the job serves
            }
            Thread.sleep(100); // polling: Flink's client API tells neither task states nor metrics
        }
    }

    private boolean serves(int engineOperators) throws IOException, InterruptedException {
        Optional<JsonNode> details = rest.find("");
        return details.isPresent() && allRunning(details.get()) && startedEngines(details.get()) == engineOperators;
    }

    static boolean allRunning(JsonNode job) {
        JsonNode vertices = job.path("vertices");
        if (!vertices.isArray() || vertices.isEmpty()) {
            return false;
        }
        for (JsonNode v : vertices) {
            // a vertex's status reads RUNNING while some of its subtasks still initialise: count them
            if (v.path("tasks").path("RUNNING").asInt(-1) != v.path("parallelism").asInt(-2)) {
                return false;
            }
        }
        return true;
    }

    /** How many of the job's operators hold an engine that every one of their subtasks has started. */
    private int startedEngines(JsonNode job) throws IOException, InterruptedException {
        int started = 0;
        for (JsonNode v : job.path("vertices")) {
            String vertex = "/vertices/" + v.path("id").asText() + "/subtasks/metrics";
            for (String metric : engineMetrics(rest.find(vertex).orElse(NullNode.getInstance()))) {
                JsonNode sum = rest.find(vertex + "?agg=sum&get=" + URLEncoder.encode(metric, StandardCharsets.UTF_8))
                        .orElse(NullNode.getInstance());
                if (allStarted(sum, v.path("parallelism").asInt())) {
                    started++;
                }
            }
        }
        return started;
    }

    /** The engine metrics among a vertex's metrics (REST lists each as {@code {"id": ...}}), one per operator. */
    static List<String> engineMetrics(JsonNode metrics) {
        List<String> ids = new ArrayList<>();
        for (JsonNode m : metrics) {
            String id = m.path("id").asText();
            if (id.endsWith(ENGINE_METRIC_SUFFIX)) {
                ids.add(id);
            }
        }
        return ids;
    }

    /** Whether the engine metric's sum over a vertex's subtasks says each of its {@code parallelism} started. */
    static boolean allStarted(JsonNode sum, int parallelism) {
        return sum.size() == 1 && sum.get(0).path("sum").asDouble() == parallelism;
    }
}
