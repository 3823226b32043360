package org.mstar.engine;

import java.util.ArrayList;
import java.util.List;

/**
 * A public engine over the {@link EngineCore}, to which every call goes, with what checks and harnesses ask of
 * any model's engine; {@link LlamaEngine} and {@link WhisperEngine} add only what their model's callers need.
 */
abstract class CoreFacade extends ForwardingEngine {
    final EngineCore core;
    /** What a loader made for this engine (the model, the tokenizer), closed after the core. */
    private final List<AutoCloseable> owned = new ArrayList<>();

    CoreFacade(EngineCore core) {
        super(core);
        this.core = core;
    }

    /**
     * For checks and harnesses: {@code observer} sees the logits of every sampled row before it is drawn (raw:
     * before any suppression), indexed by the request's output position (null removes it). While one is set each
     * step copies its logits to the host, so serving leaves it unset.
     */
    public void observeLogits(LogitsObserver observer) {
        core.observeLogits(observer);
    }

    /** For checks and harnesses: decode steps run as graph replays (0 without decode graphs). */
    public long decodeGraphReplays() {
        return core.decodeGraphReplays();
    }

    /** For harnesses: host time per step by phase. */
    public StepTimings stepTimings() {
        return core.stepTimings();
    }

    /** Close {@code resource} with this engine (the model and tokenizer a loader made for it). */
    void own(AutoCloseable resource) {
        owned.add(resource);
    }

    /**
     * Closes the core, then everything the engine owns, each whatever the others did; the first failure is thrown
     * once all are closed, the later ones suppressed in it.
     */
    @Override
    public void close() {
        RuntimeException failure = null;
        try {
            core.close();
        } catch (RuntimeException e) {
            failure = e;
        }
        for (AutoCloseable c : owned) {
            try {
                c.close();
            } catch (Exception e) {
                IllegalStateException closing = new IllegalStateException("closing " + c, e);
                if (failure == null) {
                    failure = closing;
                } else {
                    failure.addSuppressed(closing);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }
}
