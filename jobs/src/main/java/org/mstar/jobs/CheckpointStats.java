package org.mstar.jobs;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One completed checkpoint as Flink's REST API reports it: when it was triggered, how long it took from trigger to
 * the last acknowledgement, whether it went unaligned, and per task (by vertex name) the longest of its subtasks'
 * times.
 */
record CheckpointStats(long id, long triggerMillis, long endToEndMs, boolean unaligned, Map<String, TaskTimes> tasks) {
    /**
     * A task's part in a checkpoint, the largest over its subtasks, in ms: the synchronous and asynchronous parts of
     * its snapshot, the alignment of its barriers, and the start delay (from the trigger to the first barrier's
     * arrival).
     */
    record TaskTimes(long syncMs, long asyncMs, long alignmentMs, long startDelayMs) {
        /** From a {@code /checkpoints/details/:id/subtasks/:vertex} payload. */
        static TaskTimes parse(JsonNode subtasks) {
            JsonNode s = subtasks.path("summary");
            return new TaskTimes(s.path("checkpoint_duration").path("sync").path("max").asLong(),
                    s.path("checkpoint_duration").path("async").path("max").asLong(),
                    s.path("alignment").path("duration").path("max").asLong(),
                    s.path("start_delay").path("max").asLong());
        }
    }

    /** The completed checkpoints triggered in [from, to] (epoch ms) and how many failed there. */
    record Window(List<CheckpointStats> completed, int failed) {}

    /**
     * When the barrier of this checkpoint was taken by task {@code task}: its trigger, then the barrier's way there
     * and its alignment. A record the task emitted before then is in this checkpoint, one emitted after in a later one.
     */
    long barrierAtMillis(String task) {
        TaskTimes t = tasks.get(task);
        return triggerMillis + (t == null ? 0 : t.startDelayMs() + t.alignmentMs());
    }

    /** From an entry of {@code /checkpoints}' history and the subtask details of each vertex (name to payload). */
    static CheckpointStats parse(JsonNode entry, Map<String, JsonNode> subtasksByTask) {
        Map<String, TaskTimes> tasks = new LinkedHashMap<>();
        subtasksByTask.forEach((name, details) -> tasks.put(name, TaskTimes.parse(details)));
        return new CheckpointStats(entry.path("id").asLong(), entry.path("trigger_timestamp").asLong(),
                entry.path("end_to_end_duration").asLong(),
                entry.path("checkpoint_type").asText().startsWith("UNALIGNED"), tasks);
    }

    /** One checkpoint's subtask details: per task (vertex name) its {@code /checkpoints/details/:id/subtasks/:vertex}. */
    interface Details {
        Map<String, JsonNode> of(long checkpointId) throws IOException, InterruptedException;
    }

    /** The checkpoints of {@code rest}'s job triggered in [from, to] (epoch ms), oldest first. */
    static Window read(JobRest rest, Map<String, String> vertices, long from, long to)
            throws IOException, InterruptedException {
        return window(rest.get("/checkpoints"), from, to, id -> {
            Map<String, JsonNode> details = new LinkedHashMap<>();
            for (Map.Entry<String, String> v : vertices.entrySet()) {
                details.put(v.getKey(), rest.get("/checkpoints/details/" + id + "/subtasks/" + v.getValue()));
            }
            return details;
        });
    }

    /** The checkpoints of a {@code /checkpoints} payload triggered in [from, to] (epoch ms), oldest first. */
    static Window window(JsonNode checkpoints, long from, long to, Details details)
            throws IOException, InterruptedException {
        List<CheckpointStats> completed = new ArrayList<>();
        int failed = 0;
        for (JsonNode entry : checkpoints.path("history")) {
            long trigger = entry.path("trigger_timestamp").asLong();
            if (trigger < from || trigger > to) {
                continue;
            }
            String status = entry.path("status").asText();
            if (status.equals("FAILED")) {
                failed++;
            } else if (status.equals("COMPLETED")) {
                completed.add(parse(entry, details.of(entry.path("id").asLong())));
            }
        }
        completed.sort((a, b) -> Long.compare(a.id(), b.id()));
        return new Window(completed, failed);
    }
}
