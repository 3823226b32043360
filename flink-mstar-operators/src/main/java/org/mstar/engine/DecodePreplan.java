package org.mstar.engine;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.SubmoduleStep;
import org.mstar.resources.runner.StepRunner;

/**
 * Plans decode step N+1 while the device runs step N (spec §1.3), so that its admit and plan cost the host
 * next to nothing once the device is idle. Once a decode-graph step is enqueued and its resources committed,
 * {@link #stage} predicts the next step — the same requests in the same order, one decode row each, less those
 * whose next token ends them by length — and pre-admits and pre-plans it through the runner into the
 * resources' pending slots. The next step's admit promotes it when the scheduler chose exactly those rows;
 * otherwise (a request drew a stop token, another joined, one was preempted) the runner drops it and the step
 * plans inline. A predicted request that leaves or is preempted first drops it at once, before its resources
 * change under the staged plan.
 */
final class DecodePreplan {
    private final StepRunner runner;
    private final StepBuilder steps;
    private final StopRule stopRule;
    /** The requests of the staged step; empty when none is staged. */
    private Set<LiveRequest> predicted = Set.of();
    private long staged;
    private long promoted;
    private long dropped;

    DecodePreplan(StepRunner runner, StepBuilder steps, StopRule stopRule) {
        this.runner = runner;
        this.steps = steps;
        this.stopRule = stopRule;
    }

    /** After the decode-graph step of {@code launched} is enqueued and committed (bar its sampler): stage the next. */
    void stage(List<BatchRow> launched) {
        List<BatchRow> next = new ArrayList<>(launched.size());
        for (BatchRow row : launched) {
            if (!stopRule.nextTokenEndsByLength(row.request())) {
                next.add(new BatchRow(row.request(), row.start() + row.span(), 1, true));
            }
        }
        if (next.isEmpty()) {
            return;
        }
        SubmoduleStep step = steps.declare(next);
        if (!runner.preAdmit(step).ok()) {
            return; // pages are short: the next step admits inline, where preemption can make room
        }
        runner.prePlan(step);
        staged++;
        Set<LiveRequest> requests = new HashSet<>();
        next.forEach(b -> requests.add(b.request()));
        predicted = requests;
    }

    /** The runner's admit of the step the scheduler chose, counting whether it promoted the staged step. */
    FullAdmitOutcome admit(SubmoduleStep step) {
        boolean wasStaged = runner.staged();
        FullAdmitOutcome outcome = runner.admit(step);
        if (wasStaged) {
            predicted = Set.of();
            if (outcome.ok() && runner.staged()) {
                promoted++;
            } else {
                if (runner.staged()) {
                    runner.clearPreplan(); // a refused admit of the staged step itself
                }
                dropped++;
            }
        }
        return outcome;
    }

    /** Before {@code r} is removed or preempted: a staged step that counts on it is dropped. */
    void forget(LiveRequest r) {
        if (predicted.contains(r)) {
            drop();
        }
    }

    /** Undo the staged step, if any (e.g. its step's forward threw). */
    void drop() {
        predicted = Set.of();
        if (runner.staged()) {
            runner.clearPreplan();
            dropped++;
        }
    }

    PreplanCounts counts() {
        return new PreplanCounts(staged, promoted, dropped);
    }
}
