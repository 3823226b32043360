package org.mstar.jobs;

import org.apache.flink.changelog.fs.FsStateChangelogOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateChangelogOptions;

/**
 * Where Flink's changelog (FLIP-158) keeps its logs when a job turns it on ({@code -Dstate.changelog.enabled=true}):
 * RocksDB still holds the state, every change to it is also written to a log that a checkpoint uploads
 * asynchronously, and RocksDB's own snapshot is taken every 10 minutes instead of at each checkpoint.
 *
 * <p>Off unless set: its gain is where disks are slow. Without it each checkpoint's synchronous part takes a RocksDB
 * native checkpoint (a memtable flush, fsyncs, hard links) on the generate task's thread; on a loaded 2-core machine
 * that took 9-61 ms a checkpoint (p50), up to 393 ms, against 0-6 ms with the changelog. On an H100 host it took
 * 5 ms (at most 12), which the engine's launched-ahead step hides, and the changelog's uploads made the slowest
 * checkpoints take twice as long, so the exactly-once output waited longer (docs/results/2026-12-06/serving-benchmarks.md).
 */
final class ChangelogCheckpoints {
    private ChangelogCheckpoints() {}

    /**
     * Keeps the changelog, when {@code conf} turns it on, on the file system in {@code changelogDir} (a URI or a path
     * of a file system Flink supports), unless {@code conf} says where.
     */
    static Configuration applyTo(Configuration conf, String changelogDir) {
        if (!conf.get(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG)) {
            return conf;
        }
        if (!conf.contains(StateChangelogOptions.STATE_CHANGE_LOG_STORAGE)) {
            conf.set(StateChangelogOptions.STATE_CHANGE_LOG_STORAGE, "filesystem");
        }
        if (!conf.contains(FsStateChangelogOptions.BASE_PATH)) {
            conf.set(FsStateChangelogOptions.BASE_PATH, changelogDir);
        }
        return conf;
    }
}
