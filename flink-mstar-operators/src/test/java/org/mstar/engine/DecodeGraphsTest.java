package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** Which bucket a decode batch pads to. */
class DecodeGraphsTest {
    @Test
    void batchesPadToThePowerOfTwoAtOrAboveThemThenToMultiplesOf32Then128UpToTheLastBucket() {
        DecodeGraphs six = new DecodeGraphs(null, 6);
        assertThat(six.bucketFor(1)).isEqualTo(1);
        assertThat(six.bucketFor(3)).isEqualTo(4);
        assertThat(six.bucketFor(6)).isEqualTo(8);
        assertThat(six.bucketFor(9)).as("past the largest bucket: eager").isZero();

        DecodeGraphs wide = new DecodeGraphs(null, 256);
        assertThat(wide.bucketFor(33)).isEqualTo(64);
        assertThat(wide.bucketFor(64)).isEqualTo(64);
        assertThat(wide.bucketFor(65)).isEqualTo(96);
        assertThat(wide.bucketFor(129)).isEqualTo(160);
        assertThat(wide.bucketFor(225)).isEqualTo(256);
        assertThat(wide.bucketFor(256)).isEqualTo(256);

        DecodeGraphs odd = new DecodeGraphs(null, 100);
        assertThat(odd.bucketFor(100)).isEqualTo(128);
        assertThat(odd.bucketFor(129)).isZero();

        DecodeGraphs wider = new DecodeGraphs(null, 1000);
        assertThat(wider.bucketFor(256)).isEqualTo(256);
        assertThat(wider.bucketFor(257)).isEqualTo(384);
        assertThat(wider.bucketFor(1000)).isEqualTo(1024);

        DecodeGraphs widest = new DecodeGraphs(null, 4096);
        assertThat(widest.bucketFor(1024)).isEqualTo(1024);
        assertThat(widest.bucketFor(1025)).as("past the largest bucket: eager").isZero();
    }

    @Test
    void theSmallerBucketsOfTheLargestAreEveryBucketBelowIt() {
        assertThat(DecodeGraphs.rowsOfSmallerBuckets(1)).isZero();
        assertThat(DecodeGraphs.rowsOfSmallerBuckets(64)).isEqualTo(1 + 2 + 4 + 8 + 16 + 32);
        assertThat(DecodeGraphs.rowsOfSmallerBuckets(256)).isEqualTo(63 + 64 + 96 + 128 + 160 + 192 + 224);
        assertThat(DecodeGraphs.rowsOfSmallerBuckets(1024)).isEqualTo(927 + 256 + 384 + 512 + 640 + 768 + 896);
    }
}
