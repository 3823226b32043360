package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** A job row's profile from the metrics before and after it, as the REST API would have shown them. */
class JobRowProfileTest {
    private static final JobMetrics.Tasks TASKS = new JobMetrics.Tasks("mstar generate", "g", "mstar_generate.mstar.",
            "sink", "s", "sink.mstar.");

    @Test
    void countsWhatGrewDuringTheRowAndTimesFromItsStart() {
        JobMetrics before = new JobMetrics(generate(40, 10, 50_000, 1_000, 4_000, 3, 900, 500, 0, 9_000),
                Map.of("flushes", 3.0, "flushMicros", 3_000.0, "accumulateBusyTimeMs", 20.0));
        Map<String, Double> generateAfter = new HashMap<>(
                generate(2_088, 110, 3_050_000, 41_000, 204_000, 18, 6_900, 3_800, 15, 9_200));
        generateAfter.putAll(Map.of("longestBetweenStepsMicros", 30_000.0, "busySinceMillis", 10_050.0,
                "firstStepMillis", 10_052.0, "lastArrivalMillis", 10_400.0, "lastTokenMillis", 13_352.0));
        JobMetrics after = new JobMetrics(generateAfter,
                Map.of("flushes", 18.0, "flushMicros", 93_000.0, "accumulateBusyTimeMs", 420.0));
        CheckpointStats.Window window = new CheckpointStats.Window(List.of(
                new CheckpointStats(7, 13_200, 80, false, Map.of("mstar generate",
                        new CheckpointStats.TaskTimes(20, 10, 0, 30))),
                new CheckpointStats(8, 13_400, 90, false, Map.of("mstar generate",
                        new CheckpointStats.TaskTimes(25, 10, 0, 5)))), 0);

        JobRowProfile p = JobRowProfile.of(before, after, 10_000, 13_600, window, TASKS);

        assertThat(p.arrivals()).isEqualTo(new JobRowProfile.Arrivals(50, 52, 400));
        assertThat(p.steps()).isEqualTo(new JobRowProfile.Steps(100, 3_300, 3_000, 40, 200, 30, 30));
        assertThat(p.generateTask()).isEqualTo(new JobRowProfile.TaskTime(3_300, 15, 200, 15, 6));
        assertThat(p.sinkTask()).isEqualTo(new JobRowProfile.TaskTime(400, 0, 0, 15, 90));
        // the token at 13352 missed checkpoint 7's barrier (13230) and went with 8's (13405)
        assertThat(p.commitWait()).isEqualTo(new JobRowProfile.CommitWait(248, 8, 48, 90, 110));
        assertThat(p.checkpoints().completed()).isEqualTo(2);
        assertThat(p.text("", TASKS)).contains("100 steps in 3300 ms from the first step to the last token: engine"
                + " 3000 ms (30.00 ms a step), emitting 40 ms, between steps 200 ms (longest 30 ms)",
                "mstar generate: busy 3300, back-pressured 15, idle 200 ms; 15 barriers, saving state before them 6 ms",
                "sink: busy 400, back-pressured 0, idle 0 ms; 15 flushes, 90 ms");
    }

    /** The generate task's cumulative counters. */
    private static Map<String, Double> generate(double tokens, double steps, double engineMicros, double emitMicros,
            double betweenMicros, double barriers, double preBarrierMicros, double busyMs, double backPressuredMs,
            double idleMs) {
        return Map.of("tokensEmitted", tokens, "steps", steps, "engineStepMicros", engineMicros, "emitMicros",
                emitMicros, "betweenStepsMicros", betweenMicros, "barriers", barriers, "preBarrierMicros",
                preBarrierMicros, "accumulateBusyTimeMs", busyMs, "accumulateBackPressuredTimeMs", backPressuredMs,
                "accumulateIdleTimeMs", idleMs);
    }
}
