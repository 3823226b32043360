package org.mstar.engine;

/**
 * A public engine over the {@link EngineCore}, to which every call goes, with what checks and harnesses ask of
 * any model's engine; {@link LlamaEngine} and {@link WhisperEngine} add only what their model's callers need.
 */
abstract class CoreFacade extends ForwardingEngine {
    final EngineCore core;

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
        core.own(resource);
    }
}
