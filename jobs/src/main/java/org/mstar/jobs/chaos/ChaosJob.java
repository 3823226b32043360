package org.mstar.jobs.chaos;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * The job a chaos run attacks, with the processes that run it: {@code mstar serve} in one process, or the job on a
 * Flink session cluster. Faults of the broker and of the state directory's disk are the run's own; this applies
 * those of the job's processes.
 */
interface ChaosJob extends AutoCloseable {
    /** Starts the job and returns once it runs. */
    void start() throws Exception;

    /** The kinds of fault {@link #apply} takes. */
    Set<FaultSchedule.Kind> kinds();

    /**
     * Applies a fault to the job's processes; with {@code fault.overlaps()} it returns as soon as a killed process
     * is started again, without waiting until that one runs.
     */
    void apply(FaultSchedule.Fault fault) throws Exception;

    /**
     * Starts again, as a supervisor (systemd, Kubernetes) would, a process of the job that exited without being
     * killed, and waits until it runs; a note of it goes on the timeline.
     */
    void restartWhatExited() throws Exception;

    /**
     * Waits until a checkpoint that began after this call is at {@code moment}, meanwhile starting again what
     * exited (a process that died while starting takes no checkpoint); empty when none was in time.
     */
    default Optional<Path> awaitCheckpoint(CheckpointWatch.Moment moment, Duration timeout) throws Exception {
        CheckpointWatch watch = new CheckpointWatch(stateDir());
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            Optional<Path> checkpoint = watch.await(moment, Duration.ofSeconds(1));
            if (checkpoint.isPresent()) {
                return checkpoint;
            }
            restartWhatExited();
        }
        return Optional.empty();
    }

    /** The REST endpoint of the JobManager that runs the job. */
    FlinkRest rest();

    /** The job's {@code --state-dir}. */
    Path stateDir();

    /** What the job's processes went through, for the summary. */
    String summary();

    /** The logs' lines that tell of lost data, for the summary. */
    List<String> alarmingLogLines() throws IOException;
}
