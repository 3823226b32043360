package org.mstar.jobs.chaos;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import java.util.Set;

/** A seeded order of faults, each with its own seeded delays; the same seed gives the same schedule. */
final class FaultSchedule {
    enum Kind {
        /** SIGKILL serve, start it again. */
        SERVE_KILL,
        /** SIGSTOP serve for a while, then SIGCONT. */
        SERVE_FREEZE,
        /** SIGKILL serve, start it again, and SIGKILL it again soon after it said it resumes (mid-restore). */
        KILL_DURING_RESTORE,
        /** SIGKILL the job's worker (serve, or a TaskManager) while a checkpoint is in progress. */
        KILL_MID_CHECKPOINT,
        /**
         * SIGKILL the job's worker just after a checkpoint completed: while the Kafka sink commits the transactions
         * that checkpoint closed.
         */
        KILL_AT_COMMIT,
        /** SIGKILL a TaskManager that runs a generate subtask; the cluster's own restart brings the job back. */
        TASKMANAGER_KILL,
        /** SIGSTOP a TaskManager that runs a generate subtask for a while, then SIGCONT. */
        TASKMANAGER_FREEZE,
        /** SIGKILL the JobManager, start it again and submit the same command, which resumes from a checkpoint. */
        JOBMANAGER_KILL,
        /** SIGSTOP the JobManager for a while, then SIGCONT. */
        JOBMANAGER_FREEZE,
        /**
         * SIGKILL the broker, start it again on the same port and data after 0.5 to 5 s (its own start-up adds
         * more): whether the job's Kafka clients time out depends on how fast it comes back.
         */
        BROKER_KILL,
        /** SIGSTOP the broker for a while, then SIGCONT. */
        BROKER_FREEZE,
        /** SIGTERM the broker (a clean shutdown), start it again at once. */
        BROKER_RESTART,
        /** SIGKILL the broker and keep it away for longer than the job's Kafka client timeouts: the job fails over. */
        BROKER_OUTAGE,
        /** Fill the state directory's file system until it has no space left, hold it, then free it. */
        DISK_FULL
    }

    /**
     * @param gapMillis how long after the previous fault this one comes
     * @param lengthMillis how long a process stays frozen, the broker away, the disk full, the restore runs before its
     *     kill, or the kill waits after a checkpoint completed
     * @param overlaps whether the next fault comes without waiting for the job to recover from this one: it then
     *     lands while the job restores or catches up
     */
    record Fault(Kind kind, long gapMillis, long lengthMillis, boolean overlaps) {}

    private FaultSchedule() {}

    /**
     * The kinds a {@code --kinds} option names (comma-separated), each one the target takes; an empty option means
     * every kind the target takes.
     *
     * @throws IllegalArgumentException naming a kind that does not exist or that the target does not take
     */
    static Set<Kind> chosen(String option, Set<Kind> available) {
        if (option.isBlank()) {
            return available;
        }
        Set<Kind> chosen = EnumSet.noneOf(Kind.class);
        for (String name : option.split(",")) {
            Kind kind = Arrays.stream(Kind.values()).filter(k -> k.name().equalsIgnoreCase(name.strip())).findFirst()
                    .orElseThrow(() -> new IllegalArgumentException("--kinds: no fault kind " + name.strip()
                            + "; kinds: " + Arrays.toString(Kind.values())));
            if (!available.contains(kind)) {
                throw new IllegalArgumentException("--kinds: this target does not take " + kind + "; it takes "
                        + available);
            }
            chosen.add(kind);
        }
        return chosen;
    }

    /**
     * {@code eachKind} rounds, each holding one fault of every one of {@code kinds} in a shuffled order, so that a run
     * cut short after N rounds has brought every kind N times; about one fault in four overlaps the next, which then
     * comes within a second.
     */
    static List<Fault> of(long seed, Set<Kind> kinds, int eachKind, long minGapMillis, long maxGapMillis) {
        Random random = new Random(seed);
        List<Kind> order = new ArrayList<>();
        for (int round = 0; round < eachKind; round++) {
            // in the enum's order before the shuffle: a Set.of's iteration order varies between JVMs
            List<Kind> shuffled = new ArrayList<>(Arrays.stream(Kind.values()).filter(kinds::contains).toList());
            Collections.shuffle(shuffled, random);
            order.addAll(shuffled);
        }
        List<Fault> out = new ArrayList<>();
        boolean previousOverlaps = false;
        for (Kind k : order) {
            // after an overlapping fault, within a second: while the job still recovers from it
            long gap = previousOverlaps ? random.nextInt(1_000)
                    : minGapMillis + (long) (random.nextDouble() * (maxGapMillis - minGapMillis));
            long length = switch (k) {
                case SERVE_KILL, TASKMANAGER_KILL, JOBMANAGER_KILL, BROKER_RESTART, KILL_MID_CHECKPOINT -> 0;
                case SERVE_FREEZE, TASKMANAGER_FREEZE, JOBMANAGER_FREEZE, BROKER_FREEZE -> 1_000 + random.nextInt(9_000);
                case BROKER_KILL -> 500 + random.nextInt(4_500);
                case BROKER_OUTAGE -> 15_000 + random.nextInt(10_000);
                case KILL_DURING_RESTORE -> random.nextInt(5_000);
                case KILL_AT_COMMIT -> random.nextInt(300);
                case DISK_FULL -> 1_000 + random.nextInt(7_000);
            };
            previousOverlaps = random.nextInt(4) == 0;
            out.add(new Fault(k, gap, length, previousOverlaps));
        }
        return out;
    }
}
