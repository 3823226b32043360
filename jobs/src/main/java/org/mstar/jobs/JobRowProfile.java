package org.mstar.jobs;

import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.ToDoubleFunction;

/**
 * Where a job row's time went beyond the engine's, from the job's metrics before and after the row, its checkpoint
 * statistics and the client's times. Times are ms; "at" times count from the row's start.
 *
 * @param arrivals when the row's first request reached the generate operator, its first step began, and the last
 *     request arrived
 * @param steps the generate task's steps between the first step and the last token
 * @param generateTask the generate task's time as Flink counts it, and the barriers' work in the operator
 * @param sinkTask the sink writer task's time, and its flushes (one before each barrier)
 * @param commitWait from the operator emitting the row's last token to the client reading it
 */
record JobRowProfile(Arrivals arrivals, Steps steps, TaskTime generateTask, TaskTime sinkTask, CommitWait commitWait,
                     CheckpointSummary checkpoints) {
    /** The operator's busy period: it starts when a request arrives while none is live. */
    record Arrivals(double firstAtOperatorMs, double firstStepMs, double lastAtOperatorMs) {}

    /**
     * @param wallMs from the first step's start to the emission of the last token
     * @param betweenStepsMs time between a step's end and the next one's start while the engine had work
     */
    record Steps(long count, double wallMs, double engineMs, double emitMs, double betweenStepsMs,
                 double longestBetweenStepsMs, double engineMsPerStep) {}

    /** Flink's busy, back-pressured and idle time of a task, and what it did at barriers (count and time). */
    record TaskTime(double busyMs, double backPressuredMs, double idleMs, long barrierWork, double barrierWorkMs) {
        /** From a task's metrics before and after the row; {@code countName} and {@code microsName} its barrier work. */
        static TaskTime of(Map<String, Double> before, Map<String, Double> after, String countName, String microsName) {
            ToDoubleFunction<String> delta = n -> JobMetrics.delta(before, after, n);
            return new TaskTime(delta.applyAsDouble("accumulateBusyTimeMs"),
                    delta.applyAsDouble("accumulateBackPressuredTimeMs"), delta.applyAsDouble("accumulateIdleTimeMs"),
                    (long) delta.applyAsDouble(countName), delta.applyAsDouble(microsName) / 1e3);
        }
    }

    /**
     * The commit wait of the row's last token, and through which checkpoint: the first whose barrier the generate
     * task took after emitting it (-1: none found among the row's).
     *
     * @param toTriggerMs from the last token to that checkpoint's trigger (negative: its barrier waited at the task's
     *     input while the last step ran)
     * @param checkpointMs that checkpoint's trigger to its last acknowledgement
     * @param completionToReadMs from then to the client's read: the commit of the transaction and the client's poll
     */
    record CommitWait(double lastTokenToReadMs, long checkpointId, double toTriggerMs, double checkpointMs,
                      double completionToReadMs) {
        static CommitWait of(long lastTokenMillis, long readMillis, List<CheckpointStats> checkpoints, String task) {
            CheckpointStats c = checkpoints.stream().filter(x -> x.barrierAtMillis(task) >= lastTokenMillis)
                    .findFirst().orElse(null);
            double wait = readMillis - lastTokenMillis;
            if (c == null) {
                return new CommitWait(wait, -1, Double.NaN, Double.NaN, Double.NaN);
            }
            return new CommitWait(wait, c.id(), c.triggerMillis() - lastTokenMillis, c.endToEndMs(),
                    readMillis - (c.triggerMillis() + c.endToEndMs()));
        }
    }

    /**
     * @param startMillis the row's start (epoch ms)
     * @param readMillis when the client read the row's last token (epoch ms)
     */
    static JobRowProfile of(JobMetrics before, JobMetrics after, long startMillis, long readMillis,
            CheckpointStats.Window checkpoints, JobMetrics.Tasks tasks) {
        ToDoubleFunction<String> at = n -> after.generate().getOrDefault(n, 0.0);
        ToDoubleFunction<String> grew = n -> JobMetrics.delta(before.generate(), after.generate(), n);
        long lastToken = (long) at.applyAsDouble("lastTokenMillis");
        long firstStep = (long) at.applyAsDouble("firstStepMillis");
        long steps = (long) grew.applyAsDouble("steps");
        double engineMs = grew.applyAsDouble("engineStepMicros") / 1e3;
        return new JobRowProfile(
                new Arrivals(at.applyAsDouble("busySinceMillis") - startMillis, firstStep - startMillis,
                        at.applyAsDouble("lastArrivalMillis") - startMillis),
                new Steps(steps, lastToken - firstStep, engineMs, grew.applyAsDouble("emitMicros") / 1e3,
                        grew.applyAsDouble("betweenStepsMicros") / 1e3,
                        at.applyAsDouble("longestBetweenStepsMicros") / 1e3, engineMs / Math.max(1, steps)),
                TaskTime.of(before.generate(), after.generate(), "barriers", "preBarrierMicros"),
                TaskTime.of(before.sink(), after.sink(), "flushes", "flushMicros"),
                CommitWait.of(lastToken, readMillis, checkpoints.completed(), tasks.generateTask()),
                CheckpointSummary.of(checkpoints));
    }

    /** Lines for stderr, each indented by {@code indent}. */
    String text(String indent, JobMetrics.Tasks tasks) {
        Steps s = steps;
        return String.format(Locale.ROOT,
                "%sfirst request at the generate operator +%.0f ms, its first step +%.0f ms, last request +%.0f ms%n"
                + "%s%d steps in %.0f ms from the first step to the last token: engine %.0f ms (%.2f ms a step),"
                + " emitting %.0f ms, between steps %.0f ms (longest %.0f ms)%n"
                + "%s%s: busy %.0f, back-pressured %.0f, idle %.0f ms; %d barriers, saving state before them %.0f ms%n"
                + "%s%s: busy %.0f, back-pressured %.0f, idle %.0f ms; %d flushes, %.0f ms%n"
                + "%slast token emitted to read %.0f ms: through checkpoint %d (triggered at %+.0f ms from it,"
                + " trigger to last ack %.0f ms), then to the client's read %.0f ms%n%s",
                indent, arrivals.firstAtOperatorMs(), arrivals.firstStepMs(), arrivals.lastAtOperatorMs(),
                indent, s.count(), s.wallMs(), s.engineMs(), s.engineMsPerStep(), s.emitMs(), s.betweenStepsMs(),
                s.longestBetweenStepsMs(),
                indent, tasks.generateTask(), generateTask.busyMs(), generateTask.backPressuredMs(),
                generateTask.idleMs(), generateTask.barrierWork(), generateTask.barrierWorkMs(),
                indent, tasks.sinkTask(), sinkTask.busyMs(), sinkTask.backPressuredMs(), sinkTask.idleMs(),
                sinkTask.barrierWork(), sinkTask.barrierWorkMs(),
                indent, commitWait.lastTokenToReadMs(), commitWait.checkpointId(), commitWait.toTriggerMs(),
                commitWait.checkpointMs(), commitWait.completionToReadMs(),
                checkpoints.text(indent));
    }
}
