package org.mstar.engine;

import java.util.Map;
import org.mstar.device.DType;
import org.mstar.engine.llama.LlamaRunner;
import org.mstar.model.GenerationConfig;
import org.mstar.model.chat.ChatTemplate;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.tokenizer.TextTokenizer;
import org.mstar.resources.runner.StepRunner;

/**
 * Serves a {@link LlamaModel} with continuous batching: the engine loop ({@link EngineCore}, which documents
 * scheduling, preemption, fault isolation, decode graphs, pre-planning, launch-ahead and disaggregation) over the
 * model's {@link LlamaRunner}. This class is what loaders, operators and harnesses hold.
 */
public final class LlamaEngine implements GenerationEngine {
    private final EngineCore core;

    /**
     * @param tokenizer null when requests always carry token ids (text deltas are then empty)
     * @param kvDType element type of the KV pages
     */
    public LlamaEngine(LlamaModel model, TextTokenizer tokenizer, GenerationConfig generation, EngineOptions options,
                       DType kvDType) {
        this.core = new EngineCore(new LlamaRunner(model), tokenizer, generation, options, kvDType);
    }

    @Override
    public void submit(GenerationRequest request) {
        core.submit(request);
    }

    @Override
    public void resume(GenerationRequest request, int[] generated) {
        core.resume(request, generated);
    }

    @Override
    public void receive(GenerationRequest request, PrefillHandoff handoff) {
        core.receive(request, handoff);
    }

    @Override
    public void remove(String requestId) {
        core.remove(requestId);
    }

    @Override
    public StepResult step() {
        return core.step();
    }

    @Override
    public boolean hasWork() {
        return core.hasWork();
    }

    @Override
    public int waiting() {
        return core.waiting();
    }

    @Override
    public EngineStats stats() {
        return core.stats();
    }

    @Override
    public int maxBatchRows() {
        return core.maxBatchRows();
    }

    /** Render the messages of requests that send a conversation with {@code template} (the model folder's). */
    public void useChatTemplate(ChatTemplate template) {
        core.useChatTemplate(template);
    }

    /**
     * For checks and harnesses: {@code observer} sees the logits of every sampled row before it is drawn
     * (null removes it). While one is set each step copies its logits to the host, so serving leaves it unset.
     */
    public void observeLogits(LogitsObserver observer) {
        core.observeLogits(observer);
    }

    /** For checks and harnesses: decode steps launched before the step before them was accepted. */
    public long launchedAhead() {
        return core.launchedAhead();
    }

    /** For checks and harnesses: decode steps run as graph replays (0 without decode graphs). */
    public long decodeGraphReplays() {
        return core.decodeGraphReplays();
    }

    /** For harnesses: host time per step by phase. */
    public StepTimings stepTimings() {
        return core.stepTimings();
    }

    /** For checks and harnesses: decode steps planned ahead, and how many were promoted or dropped. */
    public PreplanCounts preplanCounts() {
        return core.preplanCounts();
    }

    /** For harnesses: per recorded decode bucket, the device bytes its graph keeps allocated (empty without graphs). */
    public Map<Integer, Long> decodeGraphBytes() {
        return core.decodeGraphBytes();
    }

    /** Page bytes this (decode) engine copied from prefill hand-offs; 0 for a colocated one. */
    public long handoffBytesCopied() {
        return core.handoffBytesCopied();
    }

    /** For tests: steps that reused the pre-planned step's declaration (0 without pre-planning). */
    long reusedDeclarations() {
        return core.reusedDeclarations();
    }

    /** The runner, for tests that check resource invariants. */
    StepRunner runner() {
        return core.runner();
    }

    @Override
    public void close() {
        core.close();
    }

    /** Close {@code resource} with this engine (the model and tokenizer a loader made for it). */
    void own(AutoCloseable resource) {
        core.own(resource);
    }
}
