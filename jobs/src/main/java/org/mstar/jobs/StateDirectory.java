package org.mstar.jobs;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.time.Instant;
import java.util.Comparator;
import java.util.Optional;
import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.core.fs.FileStatus;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.Path;

/**
 * Where {@code mstar serve} keeps what it needs to resume: Flink's checkpoints under {@code checkpoints/} (one
 * folder per job run, each holding {@code chk-N} folders), the keyed state's changes they refer to under
 * {@code changelog/}, and a {@link ServeManifest} of what they were taken with. Any file system Flink supports works (a local folder, or a shared one such as S3 or HDFS when the
 * job runs on a cluster); it is read through Flink's {@link FileSystem}.
 */
final class StateDirectory {
    static final String CHECKPOINTS = "checkpoints";
    /** The state changes the checkpoints refer to ({@link ChangelogCheckpoints}). */
    static final String CHANGELOG = "changelog";
    static final String MANIFEST = "manifest.properties";
    /** Flink writes a checkpoint's metadata file last, when the checkpoint completes. */
    static final String METADATA = "_metadata";
    private static final Pattern CHECKPOINT_FOLDER = Pattern.compile("chk-(\\d+)");

    private final Path root;
    private final FileSystem fs;

    StateDirectory(Path root) throws IOException {
        this.root = root;
        this.fs = root.getFileSystem();
    }

    /** The folder Flink's checkpoint storage writes to ({@code execution.checkpointing.dir}). */
    Path checkpoints() {
        return new Path(root, CHECKPOINTS);
    }

    Path root() {
        return root;
    }

    /** A completed checkpoint: its number, folder and completion time. */
    record Checkpoint(long id, Path path, Instant completed) {}

    /**
     * The newest completed checkpoint of any run: the {@code chk-N} folder with a metadata file written last
     * (then the highest N). Folders of checkpoints cut short by a crash have no metadata file and are skipped.
     */
    Optional<Checkpoint> latestCheckpoint() throws IOException {
        Checkpoint latest = null;
        Comparator<Checkpoint> order = Comparator.comparing(Checkpoint::completed).thenComparingLong(Checkpoint::id);
        for (FileStatus run : list(checkpoints())) {
            if (!run.isDir()) {
                continue;
            }
            for (FileStatus chk : list(run.getPath())) {
                Matcher m = CHECKPOINT_FOLDER.matcher(chk.getPath().getName());
                if (!chk.isDir() || !m.matches()) {
                    continue;
                }
                Path metadata = new Path(chk.getPath(), METADATA);
                if (!fs.exists(metadata)) {
                    continue;
                }
                Checkpoint c = new Checkpoint(Long.parseLong(m.group(1)), chk.getPath(),
                        Instant.ofEpochMilli(fs.getFileStatus(metadata).getModificationTime()));
                if (latest == null || order.compare(c, latest) > 0) {
                    latest = c;
                }
            }
        }
        return Optional.ofNullable(latest);
    }

    /**
     * Deletes the folders of earlier runs that hold no file any more: a resumed run claims the checkpoint it
     * restores, and Flink deletes that checkpoint's files once newer ones replace them, but not the folders. A run
     * folder with files in it is kept, since later checkpoints may still use them.
     *
     * @return how many folders were deleted
     */
    int pruneEmptyRuns() throws IOException {
        int pruned = 0;
        for (FileStatus run : list(checkpoints())) {
            if (run.isDir() && !holdsFiles(run.getPath())) {
                fs.delete(run.getPath(), true);
                pruned++;
            }
        }
        return pruned;
    }

    private boolean holdsFiles(Path dir) throws IOException {
        for (FileStatus entry : list(dir)) {
            if (!entry.isDir() || holdsFiles(entry.getPath())) {
                return true;
            }
        }
        return false;
    }

    /** Whether any checkpoint folder exists, complete or not. */
    boolean hasCheckpoints() throws IOException {
        return list(checkpoints()).length > 0;
    }

    Optional<ServeManifest> readManifest() throws IOException {
        Path file = new Path(root, MANIFEST);
        if (!fs.exists(file)) {
            return Optional.empty();
        }
        Properties p = new Properties();
        try (InputStream in = fs.open(file)) {
            p.load(in);
        }
        return Optional.of(ServeManifest.fromProperties(p));
    }

    void writeManifest(ServeManifest manifest) throws IOException {
        fs.mkdirs(root);
        try (OutputStream out = fs.create(new Path(root, MANIFEST), FileSystem.WriteMode.OVERWRITE)) {
            manifest.toProperties().store(out, "what the checkpoints beside this file were taken with (mstar serve)");
        }
    }

    /** Deletes every checkpoint, the state changes they refer to and the manifest: the next run starts over. */
    void clear() throws IOException {
        fs.delete(checkpoints(), true);
        fs.delete(new Path(root, CHANGELOG), true);
        fs.delete(new Path(root, MANIFEST), false);
    }

    private FileStatus[] list(Path dir) throws IOException {
        if (!fs.exists(dir)) {
            return new FileStatus[0];
        }
        FileStatus[] entries = fs.listStatus(dir);
        return entries == null ? new FileStatus[0] : entries;
    }
}
