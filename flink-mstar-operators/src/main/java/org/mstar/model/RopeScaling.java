package org.mstar.model;

/**
 * The {@code rope_scaling} entry of config.json, for the kinds this library implements.
 *
 * @param kind how frequencies are scaled
 * @param factor context extension factor (1 for {@link Kind#NONE})
 * @param lowFreqFactor Llama 3 only: wavelengths above {@code originalMaxPositions / lowFreqFactor} are fully scaled
 * @param highFreqFactor Llama 3 only: wavelengths below {@code originalMaxPositions / highFreqFactor} are kept
 * @param originalMaxPositions Llama 3 only: the pre-training context length
 */
public record RopeScaling(Kind kind, double factor, double lowFreqFactor, double highFreqFactor,
                          int originalMaxPositions) {

    /** Scaling rules; their config.json names are "default" (or no entry), "linear" and "llama3". */
    public enum Kind { NONE, LINEAR, LLAMA3 }

    public RopeScaling {
        if (!(factor > 0)) {
            throw new ModelFormatException("rope_scaling.factor must be > 0, got " + factor);
        }
        if (kind == Kind.LLAMA3 && !(highFreqFactor > lowFreqFactor && lowFreqFactor > 0 && originalMaxPositions > 0)) {
            throw new ModelFormatException("llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor and "
                    + "original_max_position_embeddings > 0, got " + lowFreqFactor + ", " + highFreqFactor + ", "
                    + originalMaxPositions);
        }
    }

    public static RopeScaling none() {
        return new RopeScaling(Kind.NONE, 1, 0, 0, 0);
    }

    /** Positions divided by {@code factor} (Code Llama, Llama 2 long-context fine-tunes). */
    public static RopeScaling linear(double factor) {
        return new RopeScaling(Kind.LINEAR, factor, 0, 0, 0);
    }

    /** Llama 3.1 / 3.2 wavelength-dependent scaling. */
    public static RopeScaling llama3(double factor, double lowFreqFactor, double highFreqFactor, int originalMaxPositions) {
        return new RopeScaling(Kind.LLAMA3, factor, lowFreqFactor, highFreqFactor, originalMaxPositions);
    }
}
