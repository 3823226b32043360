package org.mstar.engine;

import java.util.List;

/**
 * What one engine step produced: new tokens in order, requests that finished, requests that failed, and (from a
 * {@link EngineRole#PREFILL} engine) finished prefills handed off, which the engine no longer holds.
 */
public record StepResult(List<TokenOutput> tokens, List<FinishedRequest> finished, List<RequestFailure> failures,
                         List<PrefillHandoff> handoffs) {
    public static final StepResult EMPTY = new StepResult(List.of(), List.of(), List.of());

    public StepResult {
        tokens = List.copyOf(tokens);
        finished = List.copyOf(finished);
        failures = List.copyOf(failures);
        handoffs = List.copyOf(handoffs);
    }

    /** Without hand-offs. */
    public StepResult(List<TokenOutput> tokens, List<FinishedRequest> finished, List<RequestFailure> failures) {
        this(tokens, finished, failures, List.of());
    }

    public boolean isEmpty() {
        return tokens.isEmpty() && finished.isEmpty() && failures.isEmpty() && handoffs.isEmpty();
    }
}
