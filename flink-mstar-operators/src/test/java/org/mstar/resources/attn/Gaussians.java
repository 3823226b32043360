package org.mstar.resources.attn;

import java.util.Random;

/** Standard-normal test inputs for the attention tests. */
final class Gaussians {
    private Gaussians() {}

    /** {@code n} draws of {@code random.nextGaussian()}, in order, as floats. */
    static float[] draw(Random random, int n) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) random.nextGaussian();
        }
        return x;
    }
}
