package org.mstar.engine;

import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Finds the request at fault when a step throws. Alone in its step, a request is the culprit. Otherwise every
 * request of the step is reset (its KV recomputed from prompt + generated tokens) and becomes a suspect; suspects
 * then run alone, one at a time, until each samples a token (cleared) or throws alone (the culprit).
 */
final class FaultIsolation {
    private final RequestResources resources;
    private final Set<LiveRequest> suspects = new LinkedHashSet<>();

    FaultIsolation(RequestResources resources) {
        this.resources = resources;
    }

    boolean active() {
        return !suspects.isEmpty();
    }

    /** While active, every live request but the first suspect sits the step out. */
    Set<LiveRequest> excluded(Collection<LiveRequest> live) {
        Set<LiveRequest> out = new HashSet<>();
        if (active()) {
            LiveRequest alone = suspects.iterator().next();
            live.stream().filter(r -> r != alone).forEach(out::add);
        }
        return out;
    }

    /** After a step ran: suspects that sampled are cleared. */
    void ran(List<BatchRow> rows) {
        rows.stream().filter(BatchRow::samples).forEach(b -> suspects.remove(b.request()));
    }

    /**
     * After a step of {@code involved} (still live) requests threw: the culprit when it ran alone, else null with
     * them all reset as suspects.
     */
    LiveRequest threw(List<LiveRequest> involved) {
        if (involved.size() == 1) {
            suspects.remove(involved.get(0));
            return involved.get(0);
        }
        for (LiveRequest r : involved) {
            resources.recompute(r);
            suspects.add(r);
        }
        return null;
    }

    void forget(LiveRequest r) {
        suspects.remove(r);
    }
}
