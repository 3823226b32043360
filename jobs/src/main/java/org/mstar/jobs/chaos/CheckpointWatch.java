package org.mstar.jobs.chaos;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Watches the checkpoint folders under a state directory ({@code checkpoints/<job>/chk-N}): Flink's file system
 * checkpoint storage creates {@code chk-N} when checkpoint N begins and writes its {@code _metadata} last, when it
 * completes. What counts is a folder that was not there when the watch began, so a checkpoint of an earlier job
 * (with the same number) is never taken for a new one.
 */
final class CheckpointWatch {
    private static final String METADATA = "_metadata";

    private final Path checkpoints;
    private final Set<Path> before;

    CheckpointWatch(Path stateDir) {
        this.checkpoints = stateDir.resolve("checkpoints");
        this.before = new HashSet<>(folders());
    }

    /** What a fault waits for: a new checkpoint begun (its folder, no metadata yet) or one completed. */
    enum Moment {
        IN_PROGRESS, COMPLETED
    }

    /** Waits until a new checkpoint is at {@code moment}; empty when none was in time. */
    Optional<Path> await(Moment moment, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            for (Path chk : folders()) {
                if (!before.contains(chk) && Files.exists(chk.resolve(METADATA)) == (moment == Moment.COMPLETED)) {
                    return Optional.of(chk);
                }
            }
            // poll interval of a condition with a deadline; a tiny job's checkpoint lasts tens of milliseconds
            TimeUnit.MILLISECONDS.sleep(5);
        }
        return Optional.empty();
    }

    /** Every {@code chk-N} folder now; Flink deletes them as newer ones complete, so any may vanish meanwhile. */
    private List<Path> folders() {
        try (Stream<Path> jobs = Files.list(checkpoints)) {
            return jobs.flatMap(CheckpointWatch::chkFolders).toList();
        } catch (NoSuchFileException none) {
            return List.of();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static Stream<Path> chkFolders(Path job) {
        try (Stream<Path> files = Files.list(job)) {
            return files.filter(f -> f.getFileName().toString().startsWith("chk-")).toList().stream();
        } catch (NoSuchFileException | java.nio.file.NotDirectoryException gone) {
            return Stream.empty();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
