package org.mstar.jobs.chaos;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/** A seeded order of faults, each with its own seeded delays; the same seed gives the same schedule. */
final class FaultSchedule {
    enum Kind {
        /** SIGKILL serve, start it again. */
        SERVE_KILL,
        /** SIGSTOP serve for a while, then SIGCONT. */
        SERVE_FREEZE,
        /** SIGKILL the broker, start it again on the same port and data after a while. */
        BROKER_KILL,
        /** SIGKILL serve, start it again, and SIGKILL it again soon after it said it resumes (mid-restore). */
        KILL_DURING_RESTORE
    }

    /**
     * @param gapMillis how long after the previous fault recovered this one comes
     * @param lengthMillis how long serve stays frozen, the broker away, or the restore runs before its kill
     */
    record Fault(Kind kind, long gapMillis, long lengthMillis) {}

    private FaultSchedule() {}

    static List<Fault> of(long seed, int eachKind, long minGapMillis, long maxGapMillis) {
        Random random = new Random(seed);
        List<Kind> kinds = new ArrayList<>();
        for (Kind k : Kind.values()) {
            kinds.addAll(Collections.nCopies(eachKind, k));
        }
        Collections.shuffle(kinds, random);
        List<Fault> out = new ArrayList<>();
        for (Kind k : kinds) {
            long gap = minGapMillis + (long) (random.nextDouble() * (maxGapMillis - minGapMillis));
            long length = switch (k) {
                case SERVE_KILL -> 0;
                case SERVE_FREEZE -> 1_000 + random.nextInt(14_000);
                case BROKER_KILL -> 500 + random.nextInt(8_000);
                case KILL_DURING_RESTORE -> random.nextInt(5_000);
            };
            out.add(new Fault(k, gap, length));
        }
        return out;
    }
}
