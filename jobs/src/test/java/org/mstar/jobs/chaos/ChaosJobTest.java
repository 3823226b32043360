package org.mstar.jobs.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Waiting for a checkpoint to time a kill, the run starts again a process that died meanwhile: an hour-long run
 * once waited its full three minutes for a checkpoint of a serve that had exited while starting.
 */
class ChaosJobTest {
    @TempDir
    Path state;

    @Test
    void aProcessThatExitedWhileTheRunWaitsForACheckpointIsStartedAgain() throws Exception {
        Restarting job = new Restarting();

        Optional<Path> checkpoint = job.awaitCheckpoint(CheckpointWatch.Moment.IN_PROGRESS, Duration.ofSeconds(30));

        assertThat(job.restarts).isEqualTo(1);
        assertThat(checkpoint).contains(state.resolve("checkpoints/job-2/chk-1"));
    }

    /** A job whose process has exited: started again, it begins its first checkpoint. */
    private final class Restarting implements ChaosJob {
        int restarts;

        @Override
        public void restartWhatExited() throws Exception {
            if (restarts++ == 0) {
                Files.createDirectories(state.resolve("checkpoints/job-2/chk-1"));
            }
        }

        @Override
        public Path stateDir() {
            return state;
        }

        @Override
        public void start() {}

        @Override
        public Set<FaultSchedule.Kind> kinds() {
            return Set.of();
        }

        @Override
        public void apply(FaultSchedule.Fault fault) {}

        @Override
        public FlinkRest rest() {
            return null;
        }

        @Override
        public String summary() {
            return "";
        }

        @Override
        public List<String> alarmingLogLines() {
            return List.of();
        }

        @Override
        public void close() {}
    }
}
