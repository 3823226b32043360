package org.mstar.engine;

import java.util.ArrayList;
import java.util.List;

/** What one step collects before it is returned as a {@link StepResult}. */
final class StepOutputs {
    final List<TokenOutput> tokens = new ArrayList<>();
    final List<FinishedRequest> finished = new ArrayList<>();
    final List<RequestFailure> failures = new ArrayList<>();

    StepResult result() {
        return new StepResult(tokens, finished, failures);
    }
}
