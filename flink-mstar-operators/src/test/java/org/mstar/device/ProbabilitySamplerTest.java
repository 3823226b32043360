package org.mstar.device;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class ProbabilitySamplerTest {

    private static int sample(float[] p, float u) {
        return ProbabilitySampler.sample(p, 0, p.length, u);
    }

    @Test
    void invertsTheCdfSkippingZeros() {
        float[] p = {0f, 0.5f, 0f, 0.5f};
        assertThat(sample(p, 0f)).isEqualTo(1);
        assertThat(sample(p, 0.25f)).isEqualTo(1);
        assertThat(sample(p, 0.5f)).isEqualTo(3); // the running sum must exceed the target
        assertThat(sample(p, 0.99999994f)).isEqualTo(3);

        float[] q = {0.25f, 0.25f, 0.5f};
        assertThat(sample(q, 0.2499f)).isEqualTo(0);
        assertThat(sample(q, 0.25f)).isEqualTo(1);
        assertThat(sample(q, 0.5f)).isEqualTo(2);
    }

    @Test
    void scalesTheTargetByTheTotalSoWeightsNeedNoNormalising() {
        float[] p = {1f, 3f};
        assertThat(sample(p, 0.2f)).isEqualTo(0);
        assertThat(sample(p, 0.25f)).isEqualTo(1);
    }

    @Test
    void readsFromAnOffsetAndAcrossBlocks() {
        float[] p = new float[10 + 600];
        p[10 + 10] = 0.25f;
        p[10 + 300] = 0.5f;
        p[10 + 599] = 0.25f;
        assertThat(ProbabilitySampler.sample(p, 10, 600, 0.1f)).isEqualTo(10);
        assertThat(ProbabilitySampler.sample(p, 10, 600, 0.3f)).isEqualTo(300);
        assertThat(ProbabilitySampler.sample(p, 10, 600, 0.8f)).isEqualTo(599);
    }

    /**
     * Block 1's sum 2^-23 lifts the total above the target 1.0, but adding its tokens one at a time
     * (1 + 2^-24 rounds back to 1) never does: the last nonzero token of that block is chosen.
     */
    @Test
    void fallsBackToTheLastNonzeroTokenOfTheChosenBlock() {
        float[] p = new float[300];
        p[0] = 1f;
        p[256] = 0x1.0p-24f;
        p[257] = 0x1.0p-24f;
        assertThat(sample(p, 1f - 0x1.0p-24f)).isEqualTo(257);
    }

    @Test
    void allZeroChoosesTokenZero() {
        assertThat(sample(new float[5], 0.7f)).isZero();
    }

    /** Empirical frequencies of Philox-driven draws against the distribution, chi-square at p = 0.001. */
    @Test
    void frequenciesMatchTheDistribution() {
        int vocab = 700;
        int[] tokens = {3, 100, 255, 256, 511, 512, 650, 699};
        float[] weights = {0.05f, 0.1f, 0.15f, 0.2f, 0.05f, 0.25f, 0.1f, 0.1f};
        float[] p = new float[vocab];
        for (int i = 0; i < tokens.length; i++) {
            p[tokens[i]] = weights[i];
        }
        int draws = 40_000;
        int[] counts = new int[vocab];
        for (int i = 0; i < draws; i++) {
            counts[sample(p, Philox.uniform(12345L, i))]++;
        }
        double chi2 = 0;
        int seen = 0;
        for (int i = 0; i < tokens.length; i++) {
            double expected = draws * weights[i];
            double diff = counts[tokens[i]] - expected;
            chi2 += diff * diff / expected;
            seen += counts[tokens[i]];
        }
        assertThat(seen).as("zero-probability tokens are never drawn").isEqualTo(draws);
        // 7 degrees of freedom: P(chi2 > 24.32) = 0.001
        assertThat(chi2).isLessThan(24.32);
    }
}
