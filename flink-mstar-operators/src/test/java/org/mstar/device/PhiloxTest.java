package org.mstar.device;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Random;
import org.junit.jupiter.api.Test;

class PhiloxTest {
    private static final long MASK = 0xFFFFFFFFL;

    /**
     * Philox4x32-10 over a full 128-bit counter and 64-bit key, straight from Salmon et al. (SC'11): per
     * round, {@code (hi(M1·c2) ^ c1 ^ k0, lo(M1·c2), hi(M0·c0) ^ c3 ^ k1, lo(M0·c0))}, then the key is
     * bumped by the Weyl constants. Unsigned arithmetic in longs.
     */
    private static long[] reference(long[] ctr, long[] key) {
        long c0 = ctr[0];
        long c1 = ctr[1];
        long c2 = ctr[2];
        long c3 = ctr[3];
        long k0 = key[0];
        long k1 = key[1];
        for (int round = 0; round < 10; round++) {
            long p0 = 0xD2511F53L * c0;
            long p1 = 0xCD9E8D57L * c2;
            long n0 = (p1 >>> 32) ^ c1 ^ k0;
            long n1 = p1 & MASK;
            long n2 = (p0 >>> 32) ^ c3 ^ k1;
            long n3 = p0 & MASK;
            c0 = n0;
            c1 = n1;
            c2 = n2;
            c3 = n3;
            k0 = (k0 + 0x9E3779B9L) & MASK;
            k1 = (k1 + 0xBB67AE85L) & MASK;
        }
        return new long[] {c0, c1, c2, c3};
    }

    /** Random123's tests/kat_vectors for philox4x32 10: counter[4], key[2] → output[4]. */
    @Test
    void referenceReproducesTheRandom123KnownAnswers() {
        assertThat(reference(new long[] {0, 0, 0, 0}, new long[] {0, 0}))
                .containsExactly(0x6627e8d5L, 0xe169c58dL, 0xbc57ac4cL, 0x9b00dbd8L);
        assertThat(reference(new long[] {MASK, MASK, MASK, MASK}, new long[] {MASK, MASK}))
                .containsExactly(0x408f276dL, 0x41c83b0eL, 0xa20bc7c6L, 0x6d5451fdL);
        assertThat(reference(new long[] {0x243f6a88L, 0x85a308d3L, 0x13198a2eL, 0x03707344L},
                new long[] {0xa4093822L, 0x299f31d0L}))
                .containsExactly(0xd16cfe09L, 0x94fdccebL, 0x5001e420L, 0x24126ea1L);
    }

    @Test
    void zeroSeedAndOffsetIsTheAllZeroKnownAnswer() {
        assertThat(Philox.block(0, 0)).containsExactly(0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8);
    }

    /** Our mapping: counter (offset lo, offset hi, 0, 0), key (seed lo, seed hi). */
    @Test
    void blockIsPhiloxWithTheDocumentedCounterAndKeyMapping() {
        Random rnd = new Random(42);
        long[] edge = {0, 1, -1, Long.MAX_VALUE, Long.MIN_VALUE, 0xFFFFFFFFL, 1L << 32};
        for (int i = 0; i < 500; i++) {
            long seed = i < edge.length ? edge[i] : rnd.nextLong();
            long offset = i < edge.length ? edge[edge.length - 1 - i] : rnd.nextLong();
            long[] want = reference(new long[] {offset & MASK, offset >>> 32, 0, 0}, new long[] {seed & MASK, seed >>> 32});
            int[] got = Philox.block(seed, offset);
            for (int w = 0; w < 4; w++) {
                assertThat(got[w] & MASK).isEqualTo(want[w]);
            }
        }
    }

    @Test
    void uniformIsTheTop24BitsOfTheFirstWord() {
        assertThat(Philox.uniform(0, 0)).isEqualTo(0x6627e8 / 16777216f);
        Random rnd = new Random(7);
        for (int i = 0; i < 1000; i++) {
            long seed = rnd.nextLong();
            long offset = rnd.nextInt(1 << 20);
            float u = Philox.uniform(seed, offset);
            assertThat(u).isGreaterThanOrEqualTo(0f).isLessThan(1f);
            assertThat(u).isEqualTo((Philox.block(seed, offset)[0] >>> 8) * 0x1.0p-24f);
        }
    }
}
