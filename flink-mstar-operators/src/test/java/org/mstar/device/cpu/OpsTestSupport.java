package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.fail;

import java.util.Random;

/** Seeded inputs and tolerance checks shared by the CPU op tests. */
final class OpsTestSupport {
    private OpsTestSupport() {}

    /** Gaussian values of standard deviation {@code scale}, never exactly zero. */
    static float[] randomFloats(Random rnd, int n, double scale) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            float x;
            do {
                x = (float) (rnd.nextGaussian() * scale);
            } while (x == 0f);
            v[i] = x;
        }
        return v;
    }

    static double[] toDoubles(float[] v) {
        double[] d = new double[v.length];
        for (int i = 0; i < v.length; i++) {
            d[i] = v[i];
        }
        return d;
    }

    /**
     * {@code |actual - expected| <= rel · (|expected| + rms(expected))} for every element: relative error,
     * with the tensor's RMS as a floor so that near-zero elements (cancellation) are judged on the scale
     * of their neighbours.
     */
    static void assertClose(double[] expected, float[] actual, double rel) {
        if (expected.length != actual.length) {
            fail("expected " + expected.length + " values, got " + actual.length);
        }
        double ss = 0;
        for (double e : expected) {
            ss += e * e;
        }
        double rms = expected.length == 0 ? 0 : Math.sqrt(ss / expected.length);
        for (int i = 0; i < expected.length; i++) {
            double tol = rel * (Math.abs(expected[i]) + rms);
            if (!(Math.abs(actual[i] - expected[i]) <= tol)) {
                fail("element " + i + ": expected " + expected[i] + " got " + actual[i] + " (tolerance " + tol + ")");
            }
        }
    }
}
