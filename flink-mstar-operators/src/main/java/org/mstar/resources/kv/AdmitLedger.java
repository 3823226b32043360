package org.mstar.resources.kv;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.resources.KVStep;

/**
 * What one successful admit (and, for a staged pre-plan, its plan) changed, so that a step that will
 * not run can be given back exactly: only pages this admit freshly took are released; converted leases
 * go back to being leases; streams it created disappear.
 */
final class AdmitLedger {
    final KVStep step;
    /** Streams whose lease became their leading pages, with the lease's size. */
    final Map<CacheStream, Integer> converted = new LinkedHashMap<>();
    final List<CacheStream> created = new ArrayList<>();
    /** Pages appended to each stream (at its tail). */
    final Map<CacheStream, Integer> added = new LinkedHashMap<>();
    final List<CacheStream> marked = new ArrayList<>();
    /** Pre-forks a staged plan applied. */
    final List<Forks.Undo> forks = new ArrayList<>();

    AdmitLedger(KVStep step) {
        this.step = step;
    }

    /** Take in what a repeated admit of the same step did, so one rollback undoes both. */
    void absorb(AdmitLedger later) {
        converted.putAll(later.converted);
        created.addAll(later.created);
        later.added.forEach((s, n) -> added.merge(s, n, Integer::sum));
        marked.addAll(later.marked);
    }
}
