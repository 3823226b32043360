package org.mstar.engine;

/**
 * A {@link GenerationEngine} that passes every call to another: the base of wrappers that change only some calls
 * (taking a device's turn, injecting a failure, watching steps).
 */
public abstract class ForwardingEngine implements GenerationEngine {
    protected final GenerationEngine engine;

    protected ForwardingEngine(GenerationEngine engine) {
        this.engine = engine;
    }

    @Override
    public void submit(GenerationRequest request) {
        engine.submit(request);
    }

    @Override
    public void resume(GenerationRequest request, int[] generated) {
        engine.resume(request, generated);
    }

    @Override
    public void receive(GenerationRequest request, PrefillHandoff handoff) {
        engine.receive(request, handoff);
    }

    @Override
    public StepResult step() {
        return engine.step();
    }

    @Override
    public boolean hasWork() {
        return engine.hasWork();
    }

    @Override
    public void remove(String requestId) {
        engine.remove(requestId);
    }

    @Override
    public int waiting() {
        return engine.waiting();
    }

    @Override
    public EngineStats stats() {
        return engine.stats();
    }

    @Override
    public int maxBatchRows() {
        return engine.maxBatchRows();
    }

    @Override
    public void close() {
        engine.close();
    }
}
