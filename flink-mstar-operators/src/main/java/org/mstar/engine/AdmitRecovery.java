package org.mstar.engine;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.resources.AdapterSlotsBusy;
import org.mstar.resources.AdmitFailedReason;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.RequestOffloading;

/**
 * Makes room when admission refuses a step, so that planning it again makes progress: a request whose KV is on
 * its way back from the host, or whose adapter finds no free slot, sits the step out; pages short, the
 * {@link Scheduler} names a victim to preempt (offloaded to host pages, or freed and recomputed later), else the
 * step drops its last row, and a request that cannot fit even alone fails with a 400; a resource's runtime error
 * fails the requests it names with a 500.
 */
final class AdmitRecovery {
    private final Map<String, LiveRequest> live;
    private final Scheduler scheduler;
    private final RequestResources resources;
    private final StepPipeline pipeline;
    private final EngineCounters counters;
    /** Null unless pre-planning is on. */
    private final DecodePreplan preplan;

    AdmitRecovery(Map<String, LiveRequest> live, Scheduler scheduler, RequestResources resources,
                  StepPipeline pipeline, EngineCounters counters, DecodePreplan preplan) {
        this.live = live;
        this.scheduler = scheduler;
        this.resources = resources;
        this.pipeline = pipeline;
        this.counters = counters;
        this.preplan = preplan;
    }

    /** Make room after {@code reason} refused the step of {@code rows}; {@code excluded} gathers who sits out. */
    void recover(AdmitFailedReason reason, List<BatchRow> rows, Set<LiveRequest> excluded, StepOutputs out) {
        if (reason instanceof AdmitRuntimeError err) {
            List<String> ids = err.requestIds().isEmpty() ? rows.stream().map(b -> b.request().id()).toList()
                    : List.copyOf(err.requestIds());
            ids.forEach(rid -> pipeline.fail(live.get(rid), 500, err.message(), out));
        } else if (reason instanceof RequestOffloading ro) {
            exclude(ro.requestId(), rows, excluded);
        } else if (reason instanceof AdapterSlotsBusy busy) {
            exclude(busy.requestId(), rows, excluded);
        } else if (reason instanceof AllocationFailed af) {
            LiveRequest victim = scheduler.victim(live.values(), rows, af.requestId());
            if (victim != null) {
                preempt(victim);
            } else if (rows.size() > 1) {
                excluded.add(rows.get(rows.size() - 1).request());
            } else {
                pipeline.fail(rows.get(0).request(), 400,
                        "request needs more KV pages than the engine can give it (" + af.message() + ")", out);
            }
        } else {
            rows.forEach(b -> excluded.add(b.request()));
        }
    }

    /** Preempts the running requests a waiting one of higher priority needs the pages of ({@link Scheduler}). */
    void preemptForWaiting(Collection<LiveRequest> requests, int availablePages) {
        scheduler.preemptForWaiting(requests, availablePages).forEach(this::preempt);
    }

    /** Leaves {@code requestId} out of this step's rows: it waits for what it lacks. */
    private static void exclude(String requestId, List<BatchRow> rows, Set<LiveRequest> excluded) {
        rows.stream().filter(b -> b.request().id().equals(requestId)).forEach(b -> excluded.add(b.request()));
    }

    private void preempt(LiveRequest victim) {
        if (preplan != null) {
            preplan.forget(victim);
        }
        counters.preemptions++;
        resources.preempt(victim);
    }
}
