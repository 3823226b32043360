package org.mstar.engine;

/**
 * Step time as {@code fixed + perToken × tokens}, fitted online (exponentially weighted least squares) from the
 * steps the engine ran, times a correction that follows how far the latest steps ran over or under the fit — a
 * prompt's later chunks cost more per token (they attend to more context), which a line in tokens alone misses.
 * The scheduler asks it how many tokens fit a time bound.
 */
final class StepCostModel {
    private static final double WEIGHT = 0.1;
    private static final double CORRECTION_WEIGHT = 0.5;
    private static final int WARMUP_STEPS = 4;

    private double meanX;
    private double meanY;
    private double meanXX;
    private double meanXY;
    private double correction = 1.0;
    private long samples;

    void observe(int tokens, long nanos) {
        if (ready()) {
            double ratio = nanos / Math.max(1.0, fixed() + perToken() * tokens);
            correction += CORRECTION_WEIGHT * (Math.min(8.0, Math.max(0.125, ratio)) - correction);
        }
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

    /** Estimated nanoseconds per token of the fit (at least 1). */
    double perToken() {
        double var = meanXX - meanX * meanX;
        double slope = var > 1e-9 * Math.max(1, meanXX) ? (meanXY - meanX * meanY) / var : meanY / Math.max(1, meanX);
        return Math.max(1.0, slope);
    }

    /** Estimated nanoseconds of the fit that a step costs whatever its size (at least 0). */
    double fixed() {
        return Math.max(0.0, meanY - perToken() * meanX);
    }

    /** Most tokens a step may carry to stay within {@code boundNanos}, by the current estimate. */
    int tokensWithin(long boundNanos) {
        double t = (boundNanos / correction - fixed()) / perToken();
        return t >= Integer.MAX_VALUE ? Integer.MAX_VALUE : (int) Math.max(0, Math.floor(t));
    }
}
