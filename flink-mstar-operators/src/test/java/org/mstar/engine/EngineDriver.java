package org.mstar.engine;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** Steps an engine until it is idle, collecting each request's tokens and failures. */
final class EngineDriver {
    final Map<String, List<Integer>> tokens = new HashMap<>();
    /** Index of each request's first token seen (non-zero for a resumed request). */
    private final Map<String, Integer> firstIndex = new HashMap<>();
    final Map<String, FinishedRequest> finished = new HashMap<>();
    final List<RequestFailure> failures = new ArrayList<>();
    int steps;

    void drain(GenerationEngine engine, int maxSteps) {
        while (engine.hasWork()) {
            if (++steps > maxSteps) {
                throw new AssertionError("engine still busy after " + maxSteps + " steps");
            }
            collect(engine.step());
        }
    }

    void collect(StepResult r) {
        for (TokenOutput t : r.tokens()) {
            List<Integer> list = tokens.computeIfAbsent(t.requestId(), k -> new ArrayList<>());
            int first = firstIndex.computeIfAbsent(t.requestId(), k -> t.index());
            if (t.index() != first + list.size()) {
                throw new AssertionError("token " + t.index() + " of " + t.requestId() + " out of order");
            }
            list.add(t.tokenId());
        }
        r.finished().forEach(f -> finished.put(f.requestId(), f));
        failures.addAll(r.failures());
    }
}
