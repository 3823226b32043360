package org.mstar.resources;

/**
 * Per-request sampling parameters (see the resource-layer spec §7.2 for exact meanings). Null
 * parameters of the record constructor take the documented defaults: temperature 0.6 (0 = greedy),
 * top_k 0 (off), top_p 1 (off), min_p 0, repetition_penalty 1, window 0, min_tokens 0,
 * top_p_first false, top_p_min_keep 1, penalize_prompt true, seed 0.
 */
public record SamplingReqConfig(double temperature, int topK, double topP, boolean ignoreEos,
                                double repetitionPenalty, double minP, int repetitionWindow, int minTokens,
                                boolean topPFirst, int topPMinKeep, boolean penalizePrompt, long seed)
        implements ResourceReqConfig {

    public static final SamplingReqConfig DEFAULTS =
            new SamplingReqConfig(0.6, 0, 1.0, false, 1.0, 0.0, 0, 0, false, 1, true, 0L);

    public static SamplingReqConfig greedy() {
        return DEFAULTS.withTemperature(0.0);
    }

    public SamplingReqConfig withTemperature(double t) {
        return new SamplingReqConfig(t, topK, topP, ignoreEos, repetitionPenalty, minP, repetitionWindow, minTokens,
                topPFirst, topPMinKeep, penalizePrompt, seed);
    }

    public SamplingReqConfig withSeed(long s) {
        return new SamplingReqConfig(temperature, topK, topP, ignoreEos, repetitionPenalty, minP, repetitionWindow,
                minTokens, topPFirst, topPMinKeep, penalizePrompt, s);
    }

    public boolean greedyDecoding() {
        return temperature == 0.0;
    }

    /**
     * {@link RequestValidationException} (400) naming the field, for a value out of range or a
     * capability the node's {@code SamplerSpec} lacks.
     */
    @Override
    public void validate(NodeResourceSpec spec) {
        SamplingValidation.validate(this, spec instanceof SamplerSpec s ? s : null);
    }
}
