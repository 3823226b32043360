package org.mstar.jobs;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.StepResult;
import org.mstar.engine.TokenOutput;
import org.mstar.resources.SamplingReqConfig;

/**
 * Serves a load through a bare engine on this thread: requests are submitted when they arrive (all at once
 * offline; at their Poisson times; or one as another finishes, keeping a fixed number in flight), and the engine
 * steps while it has work. Every token is timed when the step that made it returns.
 */
final class EngineLoadRunner {
    private EngineLoadRunner() {}

    /**
     * @param concurrency requests kept in flight; 0 submits each at its arrival time
     * @param vocabSize the model's, for the random prompts
     * @param adapters the random LoRA adapters the requests are spread over ({@link ServingLoad#adapter}); 0: none
     */
    static ServingTrace run(GenerationEngine engine, ServingLoad load, int concurrency, int vocabSize, int adapters,
            long timeoutSeconds, ServingProgress progress) {
        List<ServingLoad.Request> requests = load.requests();
        Map<String, Integer> index = new HashMap<>();
        long start = System.nanoTime();
        long deadline = start + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        ServingTrace trace = new ServingTrace(load, start);
        int next = 0;
        while (trace.finished() < requests.size()) {
            long now = System.nanoTime();
            if (now > deadline) {
                throw new IllegalStateException(load.name() + ": " + trace.finished() + " of " + requests.size()
                        + " requests finished in " + timeoutSeconds + " s (raise --timeout)");
            }
            while (next < requests.size() && due(requests.get(next), next, trace, concurrency, start, now)) {
                ServingLoad.Request r = requests.get(next);
                String id = "r" + next;
                index.put(id, next);
                trace.arrived(next, now);
                engine.submit(GenerationRequest.builder(id)
                        .promptTokenIds(ServingLoad.prompt(next, r.promptLen(), vocabSize))
                        .sampling(SamplingReqConfig.greedy()).maxTokens(r.outputLen()).ignoreEos(true)
                        .adapter(ServingLoad.adapter(next, adapters)).build());
                next++;
            }
            if (!engine.hasWork()) {
                if (next < requests.size()) {
                    LockSupport.parkNanos(arrivalNanos(requests.get(next)) + start - System.nanoTime());
                }
                continue;
            }
            StepResult step = engine.step();
            if (!step.failures().isEmpty()) {
                throw new IllegalStateException(load.name() + ": the engine failed requests: " + step.failures());
            }
            long at = System.nanoTime();
            for (TokenOutput t : step.tokens()) {
                trace.token(index.get(t.requestId()), at);
            }
            progress.update(trace);
        }
        return trace;
    }

    private static boolean due(ServingLoad.Request r, int i, ServingTrace trace, int concurrency, long start, long now) {
        if (concurrency > 0) {
            return i - trace.finished() < concurrency;
        }
        return start + arrivalNanos(r) <= now;
    }

    private static long arrivalNanos(ServingLoad.Request r) {
        return (long) (r.arrivalSeconds() * 1e9);
    }
}
