package org.mstar.engine;

import java.util.List;

/** What one engine step produced: new tokens in order, requests that finished, requests that failed. */
public record StepResult(List<TokenOutput> tokens, List<FinishedRequest> finished, List<RequestFailure> failures) {
    public static final StepResult EMPTY = new StepResult(List.of(), List.of(), List.of());

    public StepResult {
        tokens = List.copyOf(tokens);
        finished = List.copyOf(finished);
        failures = List.copyOf(failures);
    }

    public boolean isEmpty() {
        return tokens.isEmpty() && finished.isEmpty() && failures.isEmpty();
    }
}
