package org.mstar.device.cpu;

/**
 * GELU with the Gaussian CDF, {@code x · Φ(x)}, in double. The JDK has no erf, so Φ comes from erfc by the
 * Chebyshev-fitted form {@code erfc(z) ≈ t · exp(−z² + P(t))}, {@code t = 1 / (1 + z/2)} (Numerical Recipes,
 * "erfcc"), whose fractional error is below 1.2·10⁻⁷ for every z ≥ 0: within about one fp32 ulp of the exact
 * value on both tails, where {@code 0.5·(1 + erf(x/√2))} would lose the small negative side to cancellation.
 */
final class ExactGelu {
    private static final double INV_SQRT2 = 0.7071067811865476;
    /** Coefficients of P(t), lowest degree first. */
    private static final double[] P = {
        -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
        0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277,
    };

    private ExactGelu() {}

    static double gelu(double x) {
        return x * phi(x);
    }

    /** The standard normal CDF: {@code Φ(x) = erfc(−x/√2) / 2}. */
    static double phi(double x) {
        double z = x * INV_SQRT2;
        return z >= 0 ? 1 - 0.5 * erfc(z) : 0.5 * erfc(-z);
    }

    /** erfc(z) for z ≥ 0. */
    private static double erfc(double z) {
        double t = 1 / (1 + 0.5 * z);
        double p = P[P.length - 1];
        for (int i = P.length - 2; i >= 0; i--) {
            p = p * t + P[i];
        }
        return t * Math.exp(-z * z + p);
    }
}
