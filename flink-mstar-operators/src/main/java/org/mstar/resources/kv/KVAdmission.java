package org.mstar.resources.kv;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.Fork;
import org.mstar.resources.KVStep;
import org.mstar.resources.RequestOffloading;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.StreamLabel;

/**
 * Admit and its undo.
 *
 * <p>Admit is all-or-nothing: it first works out, without touching anything, how many tokens each
 * stream must be able to hold (forks, then spans, as the reference orders them), checks the whole
 * step's page demand against free pages plus what the prefix index could evict, and only then converts
 * leases, creates streams, tops page lists up and marks streams in flight. A refused admit therefore
 * leaves free pages and every stream exactly as they were, and asks the index to evict nothing.
 */
final class KVAdmission {
    private final KVState st;

    KVAdmission(KVState st) {
        this.st = st;
    }

    /** An admit's answer: the outcome, and on success what it changed. */
    record Result(AdmitOutcome outcome, AdmitLedger ledger) {}

    Result admit(KVStep step, StepContext ctx) {
        List<Segment> segs = step.segments();
        Set<StreamLabel> seen = new HashSet<>();
        for (Segment seg : segs) {
            if (!StepRows.isSink(step, ctx, seg)) {
                st.requireRequest(seg.requestId());
                if (!seen.add(new StreamLabel(seg.requestId(), seg.label()))) {
                    throw new IllegalArgumentException("stream " + seg.label() + " of '" + seg.requestId()
                            + "' has two segments in one step");
                }
            }
        }

        // Leases the probe took for still-empty streams become their leading pages.
        Set<CacheStream> convert = new LinkedHashSet<>();
        for (Segment seg : segs) {
            CacheStream s = StepRows.isSink(step, ctx, seg) ? null : st.stream(seg.requestId(), seg.label());
            if (s != null && s.lease != null && s.storedLen == 0 && !s.offloaded && !s.readPending()) {
                convert.add(s);
            }
        }

        Demand demand = new Demand(convert);
        for (String rid : StepRows.forkRows(step, ctx)) {
            for (Fork f : step.preForks()) {
                AdmitOutcome o = demand.fork(step, ctx, rid, f, 0, true);
                if (o != null) return new Result(o, null);
            }
            for (Fork f : step.postForks()) {
                long extra = step.commit() ? StepRows.spanOf(step, ctx, rid, f.from()) : 0;
                AdmitOutcome o = demand.fork(step, ctx, rid, f, extra, false);
                if (o != null) return new Result(o, null);
            }
        }
        for (Segment seg : segs) {
            if (seg.span() == 0 || StepRows.isSink(step, ctx, seg)) {
                continue;
            }
            // offload claims the whole request, so a label it does not have yet waits for the reload too
            if (st.request(seg.requestId()).anyOffloaded()) {
                return new Result(offloading(seg.requestId(), seg.label()), null);
            }
            StreamLabel key = new StreamLabel(seg.requestId(), seg.label());
            demand.reserve(key, demand.lengthAtPlan(key) + seg.span());
        }

        Map<StreamLabel, Integer> need = demand.pagesNeeded();
        int total = need.values().stream().mapToInt(Integer::intValue).sum();
        if (!st.makeRoom(total)) {
            return new Result(AdmitOutcome.refused(allocationFailed(need, total)), null);
        }

        AdmitLedger ledger = new AdmitLedger(step);
        for (CacheStream s : convert) {
            ledger.converted.put(s, s.lease.size());
            st.adoptLease(s);
        }
        demand.tokens.forEach((key, tokens) -> {
            CacheStream s = st.stream(key.requestId(), key.label());
            if (s == null) {
                s = st.openStream(key.requestId(), key.label());
                ledger.created.add(s);
            }
            int added = st.topUp(s, tokens);
            if (added > 0) {
                ledger.added.put(s, added);
            }
        });
        for (Segment seg : segs) {
            CacheStream s = StepRows.isSink(step, ctx, seg) ? null : st.stream(seg.requestId(), seg.label());
            if (s != null && !s.stepInFlight) {
                s.stepInFlight = true;
                ledger.marked.add(s);
            }
        }
        return new Result(AdmitOutcome.OK, ledger);
    }

    private AllocationFailed allocationFailed(Map<StreamLabel, Integer> need, int total) {
        int supply = st.arena.freeCount() + st.evictable();
        int running = 0;
        StreamLabel blame = null;
        for (Map.Entry<StreamLabel, Integer> e : need.entrySet()) {
            running += e.getValue();
            if (running > supply) {
                blame = e.getKey();
                break;
            }
        }
        int shortBy = st.shortfall(total);
        return new AllocationFailed("KV pool short by " + shortBy + " pages (step needs " + total + ", "
                + supply + " free or evictable)", shortBy, blame.label(), blame.requestId());
    }

    private static AdmitOutcome offloading(String rid, String label) {
        return AdmitOutcome.refused(new RequestOffloading("stream " + label + " of '" + rid + "' is offloaded",
                label, rid));
    }

    /** Give back everything {@code ledger} records (a refused or abandoned step). */
    void rollback(AdmitLedger ledger) {
        unmark(ledger);
        List<Map.Entry<CacheStream, Integer>> added = new ArrayList<>(ledger.added.entrySet());
        for (int i = added.size() - 1; i >= 0; i--) {
            CacheStream s = added.get(i).getKey();
            if (alive(s)) {
                List<Integer> tail = s.pages.subList(s.pages.size() - added.get(i).getValue(), s.pages.size());
                List<Integer> gone = new ArrayList<>(tail);
                tail.clear();
                st.arena.releaseAll(gone);
                s.generation++;
            }
        }
        ledger.converted.forEach((s, leaseSize) -> {
            if (alive(s)) {
                List<Integer> head = s.pages.subList(0, leaseSize);
                s.lease = new ArrayList<>(head);
                head.clear();
                s.storedLen = 0;
                if (s.chain != null) {
                    s.chain.setCursor(0);
                }
                s.generation++;
            }
        });
        undoForks(ledger);
        removeCreated(ledger);
    }

    /**
     * Undo a staged pre-plan that will not be promoted: fork targets' lengths and generations, streams
     * it created, in-flight marks. Span pages it reserved on existing streams stay (page lists are
     * high-water marks, so a re-admit finds them).
     */
    void clearStaged(AdmitLedger ledger) {
        unmark(ledger);
        undoForks(ledger);
        removeCreated(ledger);
    }

    private void unmark(AdmitLedger ledger) {
        for (CacheStream s : ledger.marked) {
            s.stepInFlight = false;
        }
    }

    private void undoForks(AdmitLedger ledger) {
        for (int i = ledger.forks.size() - 1; i >= 0; i--) {
            ledger.forks.get(i).restore();
        }
    }

    private void removeCreated(AdmitLedger ledger) {
        for (CacheStream s : ledger.created) {
            if (alive(s)) {
                st.dropPages(s);
                st.request(s.requestId).streams.remove(s.label);
            }
        }
    }

    /** Whether the stream is still the one its request holds (the request may have been removed since). */
    private boolean alive(CacheStream s) {
        return st.stream(s.requestId, s.label) == s;
    }

    /** Tokens each stream must be able to hold after this step, worked out before anything changes. */
    private final class Demand {
        private final Set<CacheStream> converting;
        final Map<StreamLabel, Long> tokens = new LinkedHashMap<>();
        /** Lengths pre-forks will give their targets at plan time. */
        private final Map<StreamLabel, Long> forked = new HashMap<>();

        Demand(Set<CacheStream> converting) {
            this.converting = converting;
        }

        long lengthAtPlan(StreamLabel key) {
            Long f = forked.get(key);
            if (f != null) {
                return f;
            }
            CacheStream s = st.stream(key.requestId(), key.label());
            if (s == null) {
                return 0;
            }
            return converting.contains(s) ? (long) s.lease.size() * st.pageSize : s.storedLen;
        }

        void reserve(StreamLabel key, long n) {
            tokens.merge(key, n, Math::max);
        }

        /** Reserve a fork's target; returns a refusal, or null. */
        AdmitOutcome fork(KVStep step, StepContext ctx, String rid, Fork f, long extra, boolean pre) {
            if (StepRows.forkSkipped(step, ctx, rid, f)) {
                return null;
            }
            CacheStream src = st.stream(rid, f.from());
            CacheStream dst = st.stream(rid, f.to());
            if (src != null && src.offloaded) {
                return offloading(rid, f.from());
            }
            if (dst != null && dst.offloaded) {
                return offloading(rid, f.to());
            }
            if (src == null && extra == 0) {
                return null;
            }
            StreamLabel from = new StreamLabel(rid, f.from());
            StreamLabel to = new StreamLabel(rid, f.to());
            long n = lengthAtPlan(from) + extra;
            reserve(to, n);
            if (pre) {
                forked.put(to, n);
            }
            return null;
        }

        Map<StreamLabel, Integer> pagesNeeded() {
            Map<StreamLabel, Integer> need = new LinkedHashMap<>();
            tokens.forEach((key, n) -> {
                CacheStream s = st.stream(key.requestId(), key.label());
                int have = s == null ? 0 : s.pages.size() + (converting.contains(s) ? s.lease.size() : 0);
                need.put(key, Math.max(0, st.pagesFor(n) - have));
            });
            return need;
        }
    }
}
