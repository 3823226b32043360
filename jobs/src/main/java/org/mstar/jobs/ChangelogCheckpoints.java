package org.mstar.jobs;

import org.apache.flink.changelog.fs.FsStateChangelogOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateChangelogOptions;

/**
 * Checkpoints of the generate operator's keyed state through Flink's changelog (FLIP-158): RocksDB still holds the
 * state, and every change to it is also written to a log that a checkpoint uploads asynchronously.
 *
 * <p>Why: without it, each checkpoint's synchronous part takes a RocksDB native checkpoint on the generate task's
 * thread (a memtable flush to a new file, fsyncs, hard links), which no engine step can overlap: measured on the CPU
 * at 9-61 ms a checkpoint (p50) and up to 393 ms, against 0 ms (at most 6) with the changelog
 * (docs/serving-benchmarks.md). The state is materialized into RocksDB's own snapshot every 10 minutes (Flink's
 * default), off the checkpoints.
 */
final class ChangelogCheckpoints {
    private ChangelogCheckpoints() {}

    /**
     * Turns the changelog on, kept in {@code changelogDir} (a URI or a path of a file system Flink supports), unless
     * {@code conf} sets it already (e.g. {@code -Dstate.changelog.enabled=false}).
     */
    static Configuration applyTo(Configuration conf, String changelogDir) {
        if (!conf.contains(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG)) {
            conf.set(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG, true);
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
