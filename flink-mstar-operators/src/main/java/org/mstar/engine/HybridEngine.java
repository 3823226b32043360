package org.mstar.engine;

import org.mstar.device.DType;
import org.mstar.engine.mamba.HybridRunner;
import org.mstar.model.GenerationConfig;
import org.mstar.model.mamba.HybridModel;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * Serves a {@link HybridModel} (Mamba2, Bamba) with continuous batching: the engine loop ({@link EngineCore}) over
 * the model's {@link HybridRunner}. Decode steps may run as graph replays (each padding row on the state pool's
 * scratch slot), but each step is planned and launched only after the one before it is accepted (pre-planning and
 * launch-ahead are off): a recurrent state is updated in place, and a step ahead of a request's end would run its
 * state on. Only a colocated engine serves these models.
 */
public final class HybridEngine extends CoreFacade {

    /**
     * @param tokenizer null when requests always carry token ids (text deltas are then empty)
     * @param kvDType element type of the attention layers' KV pages
     * @throws IllegalArgumentException for a disaggregated role or adapters, which these models do not take
     */
    public HybridEngine(HybridModel model, TextTokenizer tokenizer, GenerationConfig generation, EngineOptions options,
                        DType kvDType) {
        super(new EngineCore(new HybridRunner(model), tokenizer, generation, stepByStep(options), kvDType));
    }

    private static EngineOptions stepByStep(EngineOptions options) {
        if (options.role() != EngineRole.COLOCATED || options.adapters() != null) {
            throw new IllegalArgumentException("a recurrent model is served colocated and without adapters (asked: "
                    + options.role() + (options.adapters() != null ? ", adapters" : "") + ")");
        }
        return options.withPreplan(false).withLaunchAhead(false);
    }
}
