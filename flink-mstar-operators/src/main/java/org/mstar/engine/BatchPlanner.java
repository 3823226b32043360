package org.mstar.engine;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;

/**
 * Continuous batching with chunked prefill: running decodes first (one token each), then prefill
 * chunks of running requests, then new requests, all under a per-step token budget and row cap.
 * A prefill longer than what is left of the budget is cut into chunks across steps.
 */
final class BatchPlanner {
    private final int maxRows;
    private final int tokenBudget;

    BatchPlanner(int maxRows, int tokenBudget) {
        if (maxRows < 1 || tokenBudget < 1) {
            throw new IllegalArgumentException("maxRows and tokenBudget must be >= 1");
        }
        this.maxRows = maxRows;
        this.tokenBudget = tokenBudget;
    }

    int tokenBudget() {
        return tokenBudget;
    }

    /**
     * @param running requests holding KV, in arrival order
     * @param waiting requests not yet started, in admission order
     * @param excluded requests to leave out this step (e.g. just preempted)
     */
    List<BatchRow> plan(Collection<LiveRequest> running, Collection<LiveRequest> waiting,
                        Collection<LiveRequest> excluded) {
        List<BatchRow> rows = new ArrayList<>();
        int budget = tokenBudget;
        List<LiveRequest> ordered = new ArrayList<>(running);
        ordered.sort(Comparator.comparingLong(r -> r.arrivalNanos));
        for (LiveRequest r : ordered) {
            if (rows.size() == maxRows || budget == 0) {
                return rows;
            }
            if (r.pending() == 1 && !excluded.contains(r)) {
                rows.add(new BatchRow(r, r.computed, 1, true));
                budget--;
            }
        }
        for (LiveRequest r : ordered) {
            if (r.pending() > 1 && !excluded.contains(r)) {
                budget = addChunk(rows, r, budget);
            }
        }
        for (LiveRequest r : waiting) {
            if (!excluded.contains(r)) {
                budget = addChunk(rows, r, budget);
            }
        }
        return rows;
    }

    private int addChunk(List<BatchRow> rows, LiveRequest r, int budget) {
        if (rows.size() == maxRows || budget == 0 || r.pending() <= 0) {
            return budget;
        }
        int span = Math.min(r.pending(), budget);
        rows.add(new BatchRow(r, r.computed, span, span == r.pending()));
        return budget - span;
    }
}
