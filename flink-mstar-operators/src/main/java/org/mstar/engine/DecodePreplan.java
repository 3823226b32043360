package org.mstar.engine;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Predicate;
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
    /** The rows of the staged step and its declaration, which the next step reuses when it has those rows. */
    private List<BatchRow> stagedRows = List.of();
    private SubmoduleStep stagedStep;
    private long staged;
    private long promoted;
    private long dropped;
    private long reused;

    DecodePreplan(StepRunner runner, StepBuilder steps, StopRule stopRule) {
        this.runner = runner;
        this.steps = steps;
        this.stopRule = stopRule;
    }

    /**
     * After the decode-graph step of {@code launched} is enqueued and committed (bar its sampler): stage the next,
     * of the requests {@code live} still holds.
     */
    void stage(List<BatchRow> launched, Predicate<LiveRequest> live) {
        List<BatchRow> next = new ArrayList<>(launched.size());
        boolean promptsTracked = true;
        for (BatchRow row : launched) {
            if (live.test(row.request()) && !stopRule.nextTokenEndsByLength(row.request())) {
                next.add(new BatchRow(row.request(), row.start() + row.span(), 1, true));
                promptsTracked &= row.request().promptTracked;
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
        // a row whose prompt is not yet tracked declares its prompt now but not at the next step: declare that afresh
        if (promptsTracked) {
            stagedRows = next;
            stagedStep = step;
        }
    }

    /** The rows of the staged step when the next step may reuse its declaration; else empty. */
    List<BatchRow> stagedRows() {
        return stagedStep != null && runner.staged() ? stagedRows : List.of();
    }

    /**
     * The staged step's declaration when {@code rows} are exactly its rows and it is still staged, so the next
     * step skips declaring it again (and the runner recognises it by identity); else null.
     */
    SubmoduleStep declared(List<BatchRow> rows) {
        if (stagedStep == null || !runner.staged() || !rows.equals(stagedRows)) {
            return null;
        }
        reused++;
        return stagedStep;
    }

    /** Steps that took the staged step's declaration instead of declaring their own. */
    long reusedDeclarations() {
        return reused;
    }

    /** The runner's admit of the step the scheduler chose, counting whether it promoted the staged step. */
    FullAdmitOutcome admit(SubmoduleStep step) {
        boolean wasStaged = runner.staged();
        FullAdmitOutcome outcome = runner.admit(step);
        forgetDeclaration();
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
        forgetDeclaration();
        if (runner.staged()) {
            runner.clearPreplan();
            dropped++;
        }
    }

    private void forgetDeclaration() {
        stagedRows = List.of();
        stagedStep = null;
    }

    PreplanCounts counts() {
        return new PreplanCounts(staged, promoted, dropped);
    }
}
