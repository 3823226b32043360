package org.mstar.engine;

import org.mstar.resources.RequestValidationException;

/**
 * The engine a Flink operator owns: requests go in, each {@link #step()} runs one micro-batch over all
 * live requests and returns what it produced. Single-threaded: one caller drives it.
 *
 * <p>Determinism: a request's tokens depend only on its prompt, its sampling config (seed included) and
 * the model, not on which requests share its batches, so {@link #resume} after a failure continues
 * exactly where the lost run would have.
 */
public interface GenerationEngine extends AutoCloseable {

    /**
     * Validate and queue a new request. Submitting an id that is already live is a no-op.
     *
     * @throws RequestValidationException a client's mistake (400), naming the field
     */
    void submit(GenerationRequest request);

    /**
     * Re-admit a request restored from a checkpoint that had already generated {@code generated} tokens:
     * its KV is recomputed from prompt + generated tokens and generation continues at index
     * {@code generated.length}, with the same random stream.
     */
    void resume(GenerationRequest request, int[] generated);

    /**
     * Take over a request whose prefill another engine ran ({@link EngineRole#DECODE}): its KV is imported from
     * {@code handoff} and generation continues at index {@code handoff.generated().length}, exactly as one engine
     * would have continued. Receiving an id that is already live is a no-op.
     *
     * @throws RequestValidationException a client's mistake (400), naming the field
     * @throws UnsupportedOperationException from an engine that serves no decode role
     */
    default void receive(GenerationRequest request, PrefillHandoff handoff) {
        throw new UnsupportedOperationException(getClass().getSimpleName() + " does not take prefill hand-offs");
    }

    /** Run one step (may be empty when nothing is live). */
    StepResult step();

    /** Whether any request is running or waiting. */
    boolean hasWork();

    /** Drop a request and free what it holds; unknown ids are ignored. */
    void remove(String requestId);

    /** Live requests not yet admitted to run. */
    int waiting();

    EngineStats stats();

    /** Most requests one step runs; 0 when the engine does not say. */
    default int maxBatchRows() {
        return 0;
    }

    @Override
    void close();
}
