package org.mstar.resources;

/**
 * RoPE positions over the streams of KV resource {@code kvCache} (its dependency). The Llama-3.1
 * frequency scaling is active only when all three of {@code lowFreqFactor}, {@code highFreqFactor}
 * and {@code oldContextLen} are set.
 *
 * @param rotaryDim rotated dims per head, null for the whole head
 * @param interleave true for the interleaved (GPT-J) pairing, false for NeoX halves
 * @param ropeScale linear position interpolation: positions are divided by it
 */
public record PositionConfig(String kvCache, PosBackend backend, PosScheme scheme, int blockStep, Integer rotaryDim,
                             boolean interleave, double ropeScale, double ropeTheta, Double lowFreqFactor,
                             Double highFreqFactor, Integer oldContextLen) {
    public PositionConfig {
        if (blockStep < 0) throw new IllegalArgumentException("block_step must be >= 0, got " + blockStep);
        if (rotaryDim != null && (rotaryDim <= 0 || rotaryDim % 2 != 0)) {
            throw new IllegalArgumentException("rotary_dim must be a positive even number, got " + rotaryDim);
        }
        if (!(ropeScale > 0)) throw new IllegalArgumentException("rope_scale must be > 0, got " + ropeScale);
        if (!(ropeTheta > 0)) throw new IllegalArgumentException("rope_theta must be > 0, got " + ropeTheta);
    }

    /** Sequential standard RoPE with theta 10000. */
    public PositionConfig(String kvCache) {
        this(kvCache, PosBackend.ROPE, PosScheme.SEQUENTIAL, 1, null, false, 1.0, 10000.0, null, null, null);
    }

    public PositionConfig withTheta(double theta) {
        return new PositionConfig(kvCache, backend, scheme, blockStep, rotaryDim, interleave, ropeScale, theta,
                lowFreqFactor, highFreqFactor, oldContextLen);
    }

    public PositionConfig withLlama31(double factor, double lowFreqFactor, double highFreqFactor, int oldContextLen) {
        return new PositionConfig(kvCache, backend, scheme, blockStep, rotaryDim, interleave, factor, ropeTheta,
                lowFreqFactor, highFreqFactor, oldContextLen);
    }

    /** Whether the Llama-3.1 scaling applies (all three parameters set). */
    public boolean llama31() {
        return lowFreqFactor != null && highFreqFactor != null && oldContextLen != null;
    }
}
