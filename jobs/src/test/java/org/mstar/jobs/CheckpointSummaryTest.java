package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The row's checkpoints from payloads shaped as Flink's REST API writes them. */
class CheckpointSummaryTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** A history entry of {@code /checkpoints}. */
    private static String entry(long id, String status, long trigger, long endToEnd, String type) {
        return String.format(Locale.ROOT, "{\"className\": \"%s\", \"id\": %d, \"status\": \"%s\","
                + " \"trigger_timestamp\": %d, \"end_to_end_duration\": %d, \"checkpoint_type\": \"%s\"}",
                status.toLowerCase(Locale.ROOT), id, status, trigger, endToEnd, type);
    }

    /** A {@code /checkpoints/details/:id/subtasks/:vertex} payload (the summary part), times in ms. */
    private static JsonNode subtasks(long sync, long async, long alignment, long startDelay) throws IOException {
        return JSON.readTree(String.format(Locale.ROOT, "{\"summary\": {"
                + "\"checkpoint_duration\": {\"sync\": {\"min\": 0, \"max\": %d}, \"async\": {\"min\": 0, \"max\": %d}},"
                + " \"alignment\": {\"duration\": {\"min\": 0, \"max\": %d}}, \"start_delay\": {\"min\": 0, \"max\": %d}}}",
                sync, async, alignment, startDelay));
    }

    /** Checkpoints 2, 3 and 5 completed within the row (1 before it, 6 after it), 4 failed. */
    private static CheckpointStats.Window window() throws Exception {
        JsonNode history = JSON.readTree("{\"history\": [" + String.join(",",
                entry(6, "COMPLETED", 5_200, 50, "CHECKPOINT"),
                entry(5, "COMPLETED", 1_600, 60, "CHECKPOINT"),
                entry(4, "FAILED", 1_400, 0, "CHECKPOINT"),
                entry(3, "COMPLETED", 1_200, 100, "UNALIGNED_CHECKPOINT"),
                entry(2, "COMPLETED", 1_000, 40, "CHECKPOINT"),
                entry(1, "COMPLETED", 900, 30, "CHECKPOINT")) + "]}");
        Map<Long, long[]> generate = Map.of(2L, new long[] {5, 10, 0, 2}, 3L, new long[] {30, 20, 0, 70},
                5L, new long[] {7, 12, 3, 4});
        return CheckpointStats.window(history, 1_000, 5_000, id -> {
            Map<String, JsonNode> details = new LinkedHashMap<>();
            long[] g = generate.get(id);
            details.put("mstar generate", subtasks(g[0], g[1], g[2], g[3]));
            details.put("sink", subtasks(1, 1, id, 8));
            return details;
        });
    }

    @Test
    void summarisesTheCheckpointsTriggeredDuringTheRowPerTask() throws Exception {
        CheckpointSummary s = CheckpointSummary.of(window());

        assertThat(s.completed()).isEqualTo(3);
        assertThat(s.unaligned()).isEqualTo(1);
        assertThat(s.failed()).isEqualTo(1);
        // nearest-rank median of 40, 100, 60 and the largest
        assertThat(s.endToEndMs()).isEqualTo(new CheckpointSummary.Spread(60, 100));
        CheckpointSummary.TaskSpread generate = s.tasks().get("mstar generate");
        assertThat(generate.syncMs()).isEqualTo(new CheckpointSummary.Spread(7, 30));
        assertThat(generate.asyncMs()).isEqualTo(new CheckpointSummary.Spread(12, 20));
        assertThat(generate.alignmentMs()).isEqualTo(new CheckpointSummary.Spread(0, 3));
        assertThat(generate.startDelayMs()).isEqualTo(new CheckpointSummary.Spread(4, 70));
        assertThat(s.tasks().get("sink").alignmentMs()).isEqualTo(new CheckpointSummary.Spread(3, 5));
        assertThat(s.text("")).contains("3 completed (1 unaligned), 1 failed; trigger to last ack ms p50/max 60/100",
                "mstar generate: sync 7/30, async 12/20, alignment 0/3, start delay 4/70 ms p50/max");
    }

    @Test
    void theLastTokenWaitsForTheFirstCheckpointWhoseBarrierTheGenerateTaskTookAfterIt() throws Exception {
        CheckpointStats.Window w = window();
        // checkpoint 3 was triggered at 1200, before the token at 1250, but its barrier reached the task at 1270
        JobRowProfile.CommitWait wait = JobRowProfile.CommitWait.of(1_250, 1_400, w.completed(), "mstar generate");
        assertThat(wait.checkpointId()).isEqualTo(3);
        assertThat(wait.toTriggerMs()).isEqualTo(-50);
        assertThat(wait.checkpointMs()).isEqualTo(100);
        assertThat(wait.completionToReadMs()).isEqualTo(100);
        assertThat(wait.lastTokenToReadMs()).isEqualTo(150);

        JobRowProfile.CommitWait later = JobRowProfile.CommitWait.of(1_280, 1_700, w.completed(), "mstar generate");
        assertThat(later.checkpointId()).isEqualTo(5);
        assertThat(later.toTriggerMs()).isEqualTo(320);

        assertThat(JobRowProfile.CommitWait.of(1_700, 1_800, w.completed(), "mstar generate").checkpointId())
                .isEqualTo(-1);
    }
}
