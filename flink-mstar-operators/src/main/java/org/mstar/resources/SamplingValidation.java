package org.mstar.resources;

/** The range and capability rules of {@link SamplingReqConfig#validate}. */
final class SamplingValidation {
    private SamplingValidation() {}

    static void validate(SamplingReqConfig c, SamplerSpec spec) {
        finite("temperature", c.temperature());
        if (c.temperature() < 0) fail("temperature", "must be >= 0, got " + c.temperature());
        finite("top_p", c.topP());
        if (!(c.topP() > 0 && c.topP() <= 1)) fail("top_p", "must be in (0, 1], got " + c.topP());
        finite("min_p", c.minP());
        if (c.minP() < 0 || c.minP() > 1) fail("min_p", "must be in [0, 1], got " + c.minP());
        finite("repetition_penalty", c.repetitionPenalty());
        if (!(c.repetitionPenalty() > 0)) fail("repetition_penalty", "must be > 0, got " + c.repetitionPenalty());
        if (c.topK() < 0) fail("top_k", "must be >= 0, got " + c.topK());
        if (c.repetitionWindow() < 0) fail("repetition_window", "must be >= 0, got " + c.repetitionWindow());
        if (c.minTokens() < 0) fail("min_tokens", "must be >= 0, got " + c.minTokens());
        if (c.topPMinKeep() < 1) fail("top_p_min_keep", "must be >= 1, got " + c.topPMinKeep());
        if (spec == null) {
            return;
        }
        if (spec.vocabSize() != null && c.topK() > spec.vocabSize()) {
            fail("top_k", "must be <= vocab size " + spec.vocabSize() + ", got " + c.topK());
        }
        if (c.minP() != 0 && !spec.enableMinP()) {
            fail("min_p", "this model's sampler does not enable min_p");
        }
        if (c.repetitionPenalty() != 1.0 && !spec.enableRepetitionPenalty()) {
            fail("repetition_penalty", "this model's sampler does not enable a repetition penalty");
        }
        if (c.repetitionWindow() > spec.maxRepetitionWindow()) {
            fail("repetition_window", "must be <= " + spec.maxRepetitionWindow() + " on this model, got " + c.repetitionWindow());
        }
        if (c.minTokens() > 0 && spec.minTokensStopIds().isEmpty()) {
            fail("min_tokens", "this model's sampler has no stop ids to hold back");
        }
        if ((c.topPFirst() || c.topPMinKeep() != 1) && !spec.enableTopPFirst()) {
            fail(c.topPFirst() ? "top_p_first" : "top_p_min_keep", "this model's sampler does not enable top_p_first");
        }
    }

    private static void finite(String field, double v) {
        if (!Double.isFinite(v)) fail(field, "must be a finite number, got " + v);
    }

    private static void fail(String field, String message) {
        throw new RequestValidationException(field, message);
    }
}
