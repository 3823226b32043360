package org.mstar.jobs.chaos;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.jobs.chaos.CheckpointWatch.Moment.COMPLETED;
import static org.mstar.jobs.chaos.CheckpointWatch.Moment.IN_PROGRESS;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The watch tells a checkpoint in progress (a {@code chk-N} folder without metadata) from a completed one, and
 * counts only folders that appeared after it began.
 */
class CheckpointWatchTest {
    @TempDir
    Path state;

    @Test
    void aNewFolderIsInProgressUntilItsMetadataIsWritten() throws Exception {
        Path job = Files.createDirectories(state.resolve("checkpoints/job-1"));
        Files.createDirectories(job.resolve("chk-3"));
        Files.createFile(Files.createDirectories(job.resolve("chk-2")).resolve("_metadata"));
        CheckpointWatch watch = new CheckpointWatch(state);

        assertThat(watch.await(IN_PROGRESS, Duration.ofMillis(50))).as("chk-3 was there before").isEmpty();
        assertThat(watch.await(COMPLETED, Duration.ofMillis(50))).as("chk-2 was there before").isEmpty();

        Path next = Files.createDirectories(state.resolve("checkpoints/job-2/chk-3"));
        assertThat(watch.await(IN_PROGRESS, Duration.ofSeconds(5))).contains(next);
        assertThat(watch.await(COMPLETED, Duration.ofMillis(50))).isEmpty();

        Files.createFile(next.resolve("_metadata"));
        assertThat(watch.await(COMPLETED, Duration.ofSeconds(5))).contains(next);
    }

    @Test
    void noCheckpointFolderYetIsNoCheckpoint() throws Exception {
        assertThat(new CheckpointWatch(state).await(IN_PROGRESS, Duration.ofMillis(20))).isEmpty();
    }
}
