package org.mstar.engine;

/**
 * Step time as {@code fixed + perToken × tokens}, fitted online (exponentially weighted least squares) from
 * the steps the engine ran; the scheduler asks it how many prefill tokens fit a time bound.
 */
final class StepCostModel {
    private static final double WEIGHT = 0.1;
    private static final int WARMUP_STEPS = 4;

    private double meanX;
    private double meanY;
    private double meanXX;
    private double meanXY;
    private long samples;

    void observe(int tokens, long nanos) {
        double w = samples == 0 ? 1.0 : WEIGHT;
        meanX += w * (tokens - meanX);
        meanY += w * (nanos - meanY);
        meanXX += w * ((double) tokens * tokens - meanXX);
        meanXY += w * ((double) tokens * nanos - meanXY);
        samples++;
    }

    /** Whether enough steps were seen to trust an estimate. */
    boolean ready() {
        return samples >= WARMUP_STEPS;
    }

    /** Estimated nanoseconds per token (at least 1). */
    double perToken() {
        double var = meanXX - meanX * meanX;
        double slope = var > 1e-9 * Math.max(1, meanXX) ? (meanXY - meanX * meanY) / var : meanY / Math.max(1, meanX);
        return Math.max(1.0, slope);
    }

    /** Estimated nanoseconds a step costs whatever its size (at least 0). */
    double fixed() {
        return Math.max(0.0, meanY - perToken() * meanX);
    }

    /** Most tokens a step may carry to stay within {@code boundNanos}, by the current estimate. */
    int tokensWithin(long boundNanos) {
        double t = (boundNanos - fixed()) / perToken();
        return t >= Integer.MAX_VALUE ? Integer.MAX_VALUE : (int) Math.max(0, Math.floor(t));
    }
}
