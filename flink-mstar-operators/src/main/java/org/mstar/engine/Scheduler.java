package org.mstar.engine;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.IntSupplier;

/**
 * Decides every step of an engine: which requests get rows (decodes first, then prefill chunks under the
 * token budget), whom to preempt and whom to bring back. Pure with respect to the device: it reads the
 * requests' progress and arrival times and the KV pages available, and returns decisions the engine carries out —
 * so it is tested without a model.
 *
 * <p>One order ranks requests everywhere (admission, rows, resumes, and preemption from the bottom):
 * arrival under {@link SchedulingPolicy#FCFS}; under {@link SchedulingPolicy#PRIORITY} a priority level is worth
 * one {@link SchedulerOptions#agingStep()} of waiting (see {@link #order()}). The order of two requests never
 * changes while both live, so steps cannot flap between them.
 */
final class Scheduler {
    private final int maxRows;
    private final int tokenBudget;
    private final int pageSize;
    /** KV pages a request's model state takes beside its tokens' ({@link ModelRunner#statePages}). */
    private final int statePages;
    /** Tokens at whose multiples every prefill chunk ends; 0 for none. */
    private final int chunkEdge;
    private final SchedulerOptions options;
    private final Ranking<LiveRequest> ranking;
    private final StepCostModel cost = new StepCostModel();

    /**
     * @param pageSize tokens per KV page, for the page estimates that gate admission
     */
    Scheduler(int maxRows, int tokenBudget, int pageSize, SchedulerOptions options) {
        this(maxRows, tokenBudget, pageSize, 0, 0, options);
    }

    /**
     * @param pageSize tokens per KV page, for the page estimates that gate admission
     * @param statePages KV pages each request's model state takes beside its tokens', from its first step
     * @param chunkEdge tokens at whose multiples every prefill chunk ends ({@link ModelRunner#prefillChunkEdge}),
     *     0 for none
     */
    Scheduler(int maxRows, int tokenBudget, int pageSize, int statePages, int chunkEdge, SchedulerOptions options) {
        if (maxRows < 1 || tokenBudget < 1 || pageSize < 1 || statePages < 0 || chunkEdge < 0) {
            throw new IllegalArgumentException("maxRows, tokenBudget and pageSize must be >= 1, statePages and"
                    + " chunkEdge >= 0");
        }
        this.chunkEdge = chunkEdge;
        this.maxRows = maxRows;
        this.tokenBudget = tokenBudget;
        this.pageSize = pageSize;
        this.statePages = statePages;
        this.options = options;
        this.ranking = new Ranking<>(options.policy(), options.agingStep(), r -> r.arrivalNanos,
                r -> r.request.priority());
    }

    /** Most rows a step gets. */
    int maxRows() {
        return maxRows;
    }

    /**
     * The rows of the next step.
     *
     * @param live every live request (waiting, running and offloaded); only waiting and running ones get rows
     * @param excluded requests to leave out of this step (just preempted, or refused by admission)
     * @param availablePages KV pages free or evictable now
     */
    List<BatchRow> plan(Collection<LiveRequest> live, Set<LiveRequest> excluded, int availablePages) {
        return plan(live, excluded, () -> availablePages);
    }

    /**
     * {@link #plan}, asking {@code availablePages} only when a new request's prefill needs the page estimate (a
     * step of decodes never does: counting evictable pages walks the prefix cache).
     */
    List<BatchRow> plan(Collection<LiveRequest> live, Set<LiveRequest> excluded, IntSupplier availablePages) {
        List<LiveRequest> candidates = new ArrayList<>();
        for (LiveRequest r : live) {
            if (r.status != RequestStatus.OFFLOADED && !excluded.contains(r) && r.pending() > 0) {
                candidates.add(r);
            }
        }
        candidates.sort(order());
        List<LiveRequest> chosen = candidates.subList(0, Math.min(maxRows, candidates.size()));
        StepFill fill = new StepFill(availablePages);
        for (LiveRequest r : chosen) {
            if (isDecode(r)) {
                fill.decode(r);
            }
        }
        int prefillLimit = prefillLimit(fill.rows.size());
        for (LiveRequest r : chosen) {
            if (!isDecode(r)) {
                prefillLimit -= fill.prefill(r, prefillLimit);
            }
        }
        // rows left by prefills that got nothing: offer them further down the order
        for (LiveRequest r : candidates.subList(chosen.size(), candidates.size())) {
            if (fill.rows.size() == maxRows) {
                break;
            }
            if (isDecode(r)) {
                fill.decode(r);
            } else {
                prefillLimit -= fill.prefill(r, prefillLimit);
            }
        }
        return fill.rows;
    }

    /**
     * Whether {@link #plan}, asked once the tokens of the step in flight are accepted, would choose exactly
     * {@code staged}: that step's requests that go on (each a decode row, in rank order). True when no one else is
     * live, or when {@code staged} fills every row and outranks everyone else — waiting, offloaded or partly
     * prefilled — so none of them could take a row nor make a staged one give way. Lets the engine launch the
     * staged step before accepting the tokens without changing a step.
     *
     * @param inFlight the requests of the step in flight: those not staged are leaving
     */
    boolean plansExactly(Collection<LiveRequest> live, Set<LiveRequest> inFlight, List<BatchRow> staged) {
        Comparator<LiveRequest> rank = order();
        for (int i = 1; i < staged.size(); i++) {
            if (rank.compare(staged.get(i - 1).request(), staged.get(i).request()) > 0) {
                return false; // a prompt's last token joined the decodes out of rank order: the plan reorders
            }
        }
        LiveRequest lowestStaged = staged.get(staged.size() - 1).request();
        for (LiveRequest r : live) {
            if (!inFlight.contains(r) && (staged.size() < maxRows || rank.compare(r, lowestStaged) < 0)) {
                return false; // a free row, or a staged one, is its
            }
        }
        return true;
    }

    /**
     * Under {@link SchedulingPolicy#PRIORITY}: running requests to preempt so that the first waiting request,
     * when it outranks them, can start although pages are short. Lowest-ranked first; none under FCFS.
     */
    List<LiveRequest> preemptForWaiting(Collection<LiveRequest> live, int availablePages) {
        if (!preemptsForWaiting()) {
            return List.of();
        }
        LiveRequest head = live.stream().filter(r -> r.status == RequestStatus.WAITING).min(order()).orElse(null);
        if (head == null) {
            return List.of();
        }
        int need = pagesFor(head.computed + Math.min(head.pending(), tokenBudget)) - pagesHeld(head.computed);
        List<LiveRequest> running = live.stream().filter(r -> r.status == RequestStatus.RUNNING).toList();
        return ranking.victims(head, running, availablePages, need, r -> pagesHeld(r.computed));
    }

    /** Whether {@link #preemptForWaiting} can name anyone: only under {@link SchedulingPolicy#PRIORITY}. */
    boolean preemptsForWaiting() {
        return ranking.preempts();
    }

    /**
     * Whom to preempt after admission refused pages to {@code shortRequest}: a request outside the step first
     * (least recently active, lowest-ranked first), else the lowest-ranked one in the step when it ranks below
     * the request that ran short; null when no one should give way.
     */
    LiveRequest victim(Collection<LiveRequest> live, List<BatchRow> rows, String shortRequest) {
        Set<LiveRequest> inStep = new HashSet<>();
        rows.forEach(b -> inStep.add(b.request()));
        Comparator<LiveRequest> rank = order();
        LiveRequest outside = null;
        LiveRequest inside = null;
        for (LiveRequest r : live) {
            // a waiting request with pages (a cached prefix it took, or prefill chunks) holds them like a running one
            if (r.status == RequestStatus.OFFLOADED || r.computed == 0 || r.id().equals(shortRequest)) {
                continue;
            }
            if (!inStep.contains(r)) {
                if (outside == null || outsideFirst(r, outside)) {
                    outside = r;
                }
            } else if (inside == null || rank.compare(r, inside) > 0) {
                inside = r;
            }
        }
        if (outside != null) {
            return outside;
        }
        LiveRequest shortR = live.stream().filter(r -> r.id().equals(shortRequest)).findFirst().orElse(null);
        return inside != null && shortR != null && rank.compare(inside, shortR) > 0 ? inside : null;
    }

    /** Outside the step: the lower priority gives way first (under PRIORITY), then the least recently active. */
    private boolean outsideFirst(LiveRequest a, LiveRequest b) {
        if (options.policy() == SchedulingPolicy.PRIORITY && a.request.priority() != b.request.priority()) {
            return a.request.priority() < b.request.priority();
        }
        return a.lastActiveStep < b.lastActiveStep;
    }

    /**
     * Offloaded requests to bring back, in order: those that outrank every waiting request (a waiting request
     * that outranks one gets the pages first).
     */
    List<LiveRequest> resumeOrder(Collection<LiveRequest> live) {
        List<LiveRequest> offloaded = new ArrayList<>();
        for (LiveRequest r : live) {
            if (r.status == RequestStatus.OFFLOADED) {
                offloaded.add(r);
            }
        }
        if (offloaded.isEmpty()) {
            return List.of(); // the usual step: no second pass for the waiting head
        }
        Comparator<LiveRequest> rank = order();
        LiveRequest head = live.stream().filter(r -> r.status == RequestStatus.WAITING).min(rank).orElse(null);
        return offloaded.stream().filter(r -> head == null || rank.compare(r, head) < 0).sorted(rank).toList();
    }

    /** Feed a finished step's size and duration to the estimate behind {@link SchedulerOptions#maxPrefillStall()}. */
    void observeStep(int tokens, long nanos) {
        cost.observe(tokens, nanos);
    }

    /** The ranking order, best first ({@link Ranking}). */
    Comparator<LiveRequest> order() {
        return ranking.order();
    }

    private static boolean isDecode(LiveRequest r) {
        return r.status == RequestStatus.RUNNING && r.pending() == 1;
    }

    /** Prefill tokens a step with {@code decodes} decode rows may carry. */
    private int prefillLimit(int decodes) {
        long stall = options.maxPrefillStall().toNanos();
        if (stall == 0 || decodes == 0 || !cost.ready()) {
            return Integer.MAX_VALUE;
        }
        return Math.max(options.minPrefillChunk(), cost.tokensWithin(stall) - decodes);
    }

    /** KV pages a request of {@code tokens} takes, its model state's included. */
    private int pagesFor(int tokens) {
        return statePages + (tokens + pageSize - 1) / pageSize;
    }

    /** KV pages a request holds with {@code computed} tokens: none before its first step. */
    private int pagesHeld(int computed) {
        return computed == 0 ? 0 : pagesFor(computed);
    }

    /** The rows of one step as they are filled, with the budget and the page estimate left. */
    private final class StepFill {
        final List<BatchRow> rows = new ArrayList<>();
        int budget = tokenBudget;
        private final IntSupplier availablePages;
        /** Pages available at the start of the step, asked once and only when needed; -1 before. */
        private int pagesAvailable = -1;
        /** Pages the rows so far will take. */
        private int pagesTaken;
        /** Once a new request did not fit, later new ones wait too, so a large prompt is not overtaken forever. */
        boolean admissionClosed;

        StepFill(IntSupplier availablePages) {
            this.availablePages = availablePages;
        }

        void decode(LiveRequest r) {
            if (rows.size() == maxRows || budget == 0) {
                return;
            }
            rows.add(new BatchRow(r, r.computed, 1, true));
            budget--;
            pagesTaken += pagesFor(r.computed + 1) - pagesFor(r.computed);
        }

        private int pagesLeft() {
            if (pagesAvailable < 0) {
                pagesAvailable = availablePages.getAsInt();
            }
            return pagesAvailable - pagesTaken;
        }

        /** Adds a chunk of {@code r}'s pending tokens; returns its size (0 when it got no row). */
        int prefill(LiveRequest r, int limit) {
            if (rows.size() == maxRows || budget == 0 || limit <= 0) {
                return 0;
            }
            int span = Math.min(r.pending(), Math.min(budget, limit));
            if (chunkEdge > 0) {
                span = Math.min(span, chunkEdge - r.computed % chunkEdge);
            }
            int need = pagesFor(r.computed + span) - pagesHeld(r.computed);
            boolean fresh = r.status == RequestStatus.WAITING;
            if (fresh && (admissionClosed || (!rows.isEmpty() && need > pagesLeft()))) {
                admissionClosed = true;
                return 0;
            }
            rows.add(new BatchRow(r, r.computed, span, span == r.pending()));
            budget -= span;
            pagesTaken += need;
            return span;
        }
    }
}
