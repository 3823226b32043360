package org.mstar.jobs;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * Waits until every task of a job on the local cluster runs: its operators opened, so the engines are built and the
 * model loaded. A job is RUNNING as soon as its tasks are deployed; a model that cannot be loaded fails a task after
 * that, and serve would say "is running" before saying why it stopped.
 */
final class TasksStarted {
    private static final ObjectMapper JSON = new ObjectMapper();

    private TasksStarted() {}

    /**
     * Polls {@code restUrl}'s job details until all the job's vertices run.
     *
     * @param ended the job's result: when it completes first, its failure is thrown
     * @throws Exception the job's failure, when it ends before its tasks all run
     */
    static void await(String restUrl, String jobId, CompletableFuture<?> ended) throws Exception {
        HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(2)).build();
        HttpRequest details = HttpRequest.newBuilder(URI.create(restUrl + "/jobs/" + jobId))
                .timeout(Duration.ofSeconds(10)).build();
        while (true) {
            if (ended.isDone()) {
                ended.get();
                return;
            }
            HttpResponse<String> r;
            try {
                r = http.send(details, HttpResponse.BodyHandlers.ofString());
            } catch (IOException unreachable) {
                return; // no REST endpoint to ask (a range given with -D): the job's RUNNING has to do
            }
            if (r.statusCode() == 200 && allRunning(JSON.readTree(r.body()))) {
                return;
            }
            Thread.sleep(100); // polling: Flink's client API tells no task states
        }
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
}
