package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** Which bucket a decode batch pads to. */
class DecodeGraphsTest {
    @Test
    void batchesPadToThePowerOfTwoAtOrAboveThemUpToTheLastBucket() {
        DecodeGraphs six = new DecodeGraphs(null, 6);
        assertThat(six.bucketFor(1)).isEqualTo(1);
        assertThat(six.bucketFor(3)).isEqualTo(4);
        assertThat(six.bucketFor(6)).isEqualTo(8);

        DecodeGraphs wide = new DecodeGraphs(null, 256);
        assertThat(wide.bucketFor(64)).isEqualTo(64);
        assertThat(wide.bucketFor(65)).isEqualTo(128);
        assertThat(wide.bucketFor(256)).isEqualTo(256);

        DecodeGraphs wider = new DecodeGraphs(null, 1024);
        assertThat(wider.bucketFor(256)).isEqualTo(256);
        assertThat(wider.bucketFor(257)).as("past the largest bucket: eager").isZero();
    }
}
