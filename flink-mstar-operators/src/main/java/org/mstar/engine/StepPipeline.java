package org.mstar.engine;

import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Predicate;
import org.mstar.device.DeviceFault;
import org.mstar.device.Tensor;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.runner.StepRunner;
import org.mstar.resources.sampler.PendingDraw;
import org.mstar.resources.sampler.SamplerResource;

/**
 * The device side of the engine loop, from a planned step to its accepted tokens: the forward and the draw
 * enqueued, the resources committed (the sampler once the tokens are on the host), the next decode step pre-planned
 * and, when only this step's tokens can change it, launched before they are accepted. A step that throws fails only
 * the request at fault ({@link FaultIsolation}).
 */
final class StepPipeline {
    private final StepRunner runner;
    private final SamplerResource sampler;
    /** The sampler's resource key: it commits once the tokens are on the host, after the rest of a step. */
    private final String samplerKey;
    private final StepForward forwards;
    private final HostLogitRules rules;
    private final TokenAcceptor acceptor;
    private final StepBuilder steps;
    private final Scheduler scheduler;
    private final FaultIsolation isolation;
    private final HandoffInbox inbox;
    /** Null unless decode graphs and pre-planning are on. */
    private final DecodePreplan preplan;
    private final StepTimings timings;
    private final Map<String, LiveRequest> live;
    /** The engine's removal of a request, freeing what it holds. */
    private final Consumer<String> remove;
    private final boolean launchAhead;
    private long launchedAhead;
    /** The step whose tokens are drawn on the device and not yet accepted; null when none. */
    private InFlightStep inFlight;

    StepPipeline(StepRunner runner, SamplerResource sampler, String samplerKey, StepForward forwards,
                 TokenAcceptor acceptor, StepBuilder steps, Scheduler scheduler, FaultIsolation isolation,
                 HandoffInbox inbox, DecodePreplan preplan, StepTimings timings, Map<String, LiveRequest> live,
                 Consumer<String> remove, boolean launchAhead) {
        this.runner = runner;
        this.sampler = sampler;
        this.samplerKey = samplerKey;
        this.forwards = forwards;
        this.rules = new HostLogitRules(sampler, forwards.model());
        this.acceptor = acceptor;
        this.steps = steps;
        this.scheduler = scheduler;
        this.isolation = isolation;
        this.inbox = inbox;
        this.preplan = preplan;
        this.timings = timings;
        this.live = live;
        this.remove = remove;
        this.launchAhead = launchAhead;
    }

    /** Whether a step's tokens are drawn on the device and not yet accepted. */
    boolean inFlight() {
        return inFlight != null;
    }

    /** Enqueue the forward and draw of {@code step} (admitted and planned at {@code start}) and commit it. */
    void launch(PlannedStep step, long start) {
        inFlight = drawAndCommit(step, forwards.forward(step, null), start, r -> true);
    }

    /** A step threw before its tokens were accepted: fail the request at fault, or reset its requests as suspects. */
    void failStep(List<BatchRow> rows, RuntimeException e, StepOutputs out) {
        if (preplan != null) {
            preplan.drop();
        }
        List<LiveRequest> involved = rows.stream().map(BatchRow::request).filter(r -> live.get(r.id()) == r).toList();
        fail(isolation.threw(involved), 500, "serving this request failed: " + e, out);
    }

    /**
     * With {@code p}'s forward enqueued: enqueue its draw, commit what the forward consumed (all but the sampler,
     * which waits for the tokens) and, after a decode-graph step, plan the next one (of the requests {@code staying})
     * while the device runs this one.
     */
    private InFlightStep drawAndCommit(PlannedStep p, Tensor logits, long start, Predicate<LiveRequest> staying) {
        PendingDraw draw;
        float[][] hostLogits;
        try {
            forwards.observe(p.sampleRids(), logits, live);
            hostLogits = rules.apply(p, logits);
            int sampled = p.sampleRids().size();
            draw = sampler.launchSample(p.sampleRids(), p.logitsRows().length == 0 ? logits : logits.rows(0, sampled));
        } finally {
            if (p.step().ctx().slotLease() == null) {
                logits.close(); // the device frees in stream order, after the draw has read them
            }
        }
        timings.end(StepTimings.Phase.LAUNCH);
        runner.commit(p.step(), key -> !key.equals(samplerKey));
        timings.end(StepTimings.Phase.COMMIT);
        if (preplan != null && p.step().ctx().slotLease() != null) {
            preplan.stage(p.rows(), r -> live.get(r.id()) == r && staying.test(r));
        }
        timings.end(StepTimings.Phase.PREPLAN);
        return new InFlightStep(p, draw, hostLogits, start);
    }

    /**
     * Accept the in-flight step's tokens. When nothing but those tokens can change the next step (it is staged),
     * launch the next step first, so the device runs it while the host accepts; it is then the one in flight.
     */
    void finish(StepOutputs out, long stepNo) {
        InFlightStep f = inFlight;
        inFlight = null;
        PlannedStep ahead = launchableAhead(f);
        Tensor aheadLogits = null;
        RuntimeException aheadFault = null;
        if (ahead != null) {
            try {
                aheadLogits = launchAhead(ahead, f);
            } catch (DeviceFault e) {
                throw e;
            } catch (RuntimeException e) {
                aheadFault = e;
            }
        }
        Set<String> done = new LinkedHashSet<>();
        long drawnAt;
        try {
            int[] drawn = f.draw().tokens();
            // the device moves on to the step launched ahead now: its cost runs from here
            drawnAt = System.nanoTime();
            f.draw().close();
            timings.end(StepTimings.Phase.WAIT);
            runner.commit(f.step().step(), samplerKey::equals);
            acceptor.acceptRows(f.step(), drawn, f.hostLogits(), stepNo, out, done);
        } catch (DeviceFault e) {
            throw e;
        } catch (RuntimeException e) {
            // the step launched ahead holds only requests of this one, which the isolation resets
            done.forEach(remove);
            failStep(f.step().rows(), e, out);
            return;
        }
        timings.end(StepTimings.Phase.ACCEPT);
        scheduler.observeStep(f.step().tokenCount(), System.nanoTime() - f.launchedNanos());
        isolation.ran(f.step().rows());
        timings.stepRan();
        if (aheadLogits != null) {
            try {
                inFlight = drawAndCommit(ahead, aheadLogits, drawnAt, r -> !done.contains(r.id()));
            } catch (DeviceFault e) {
                throw e;
            } catch (RuntimeException e) {
                aheadFault = e;
            }
        }
        // requests that stopped at f's token leave once the step launched ahead committed their rows (its draw
        // drops them)
        done.forEach(remove);
        if (aheadFault != null) {
            failStep(ahead.rows(), aheadFault, out);
        }
    }

    /**
     * The staged step, to launch before {@code f} is accepted when only its tokens can change it — the requests
     * outside f's rows (waiting, offloaded) cannot take a row — else null.
     */
    private PlannedStep launchableAhead(InFlightStep f) {
        if (!launchAhead || preplan == null || !inbox.isEmpty() || isolation.active() || runsPrograms(f)) {
            return null;
        }
        // a staged request that was removed or preempted since dropped the stage (DecodePreplan.forget)
        List<BatchRow> rows = preplan.stagedRows();
        if (rows.isEmpty() || !scheduler.plansExactly(live.values(), f.requests(), rows)) {
            return null;
        }
        return steps.buildFedOnDevice(rows, preplan.declared(rows));
    }

    /**
     * Whether {@code f} has a row of a {@link ModelRequest}: its token may end a sequence, whose KV is then freed
     * while a step launched ahead would still write it.
     */
    private static boolean runsPrograms(InFlightStep f) {
        return f.step().rows().stream().anyMatch(row -> row.request().program != null);
    }

    /** Admit and plan {@code p} (the staged step: promoted) and enqueue its forward fed from {@code f}'s draw. */
    private Tensor launchAhead(PlannedStep p, InFlightStep f) {
        FullAdmitOutcome o = preplan.admit(p.step());
        if (!o.ok()) {
            throw new IllegalStateException("the staged step was refused at its admit: " + o.reason());
        }
        runner.plan(p.step());
        timings.end(StepTimings.Phase.ADMIT_PLAN);
        Tensor logits = forwards.forward(p, f);
        timings.end(StepTimings.Phase.LAUNCH);
        launchedAhead++;
        return logits;
    }

    /** Fail {@code r} (null: nothing to fail) with {@code code}: reported, and removed with what it holds. */
    void fail(LiveRequest r, int code, String message, StepOutputs out) {
        if (r != null) {
            out.failures.add(new RequestFailure(r.id(), code, message));
            remove.accept(r.id());
        }
    }

    /** Decode steps launched before the step before them was accepted. */
    long launchedAhead() {
        return launchedAhead;
    }

    /**
     * Wait for the in-flight step, if any, so nothing is freed while the device may still use it; returns how that
     * failed (e.g. the device failed), null when it did not, for the engine to throw once it freed the rest.
     */
    RuntimeException drain() {
        RuntimeException failure = null;
        if (inFlight != null) {
            try {
                inFlight.draw().tokens();
            } catch (RuntimeException e) {
                failure = e;
            }
            inFlight.draw().close();
            inFlight = null;
        }
        return failure;
    }
}
