package org.mstar.device;

/**
 * From logits to tokens: greedy argmax, structured output's mask, and the sampling pipeline of {@link
 * SamplingBatch}. One family of {@link ComputeOps}.
 */
public interface SamplingOps {

    /** {@code out[r] = argmax(logits[r, :])}, lowest index on ties; out I32 {@code [rows]}. */
    void argmax(Tensor logits, Tensor out);

    /**
     * Structured output's mask, in place: {@code logits[r, v] = -inf} unless bit {@code v & 31} of
     * {@code allowed[r, v >>> 5]} is set. Logits F32 {@code [rows, vocab]}; allowed I32
     * {@code [rows, ceil(vocab / 32)]}, bits past the vocabulary ignored.
     */
    void maskLogits(Tensor logits, Tensor allowed);

    /** Steps 1-6 of the sampling pipeline ({@link SamplingBatch}): logits F32 {@code [rows, vocab]} → probs F32. */
    void samplingProbs(Tensor logits, SamplingBatch batch, Tensor probs);

    /**
     * Step 7: draw one token per row from {@code probs} with the canonical {@link ProbabilitySampler}
     * rule and Philox uniforms keyed by {@code seeds[r]} at counter {@code offsets[r]} (both I64).
     */
    void sampleFromProbs(Tensor probs, Tensor seeds, Tensor offsets, Tensor out);
}
