package org.mstar.device;

/**
 * Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"), the counter-based
 * generator behind sampling: key = the request's 64-bit seed, counter = (offset lo, offset hi, 0, 0),
 * where the offset is the token's position in that request's output. The same (seed, offset) gives the
 * same number on every device and in every batch, so a replay reproduces its tokens.
 */
public final class Philox {
    private static final int M0 = 0xD2511F53;
    private static final int M1 = 0xCD9E8D57;
    private static final int W0 = 0x9E3779B9;
    private static final int W1 = 0xBB67AE85;

    private Philox() {}

    /** The four 32-bit outputs for (seed, offset). */
    public static int[] block(long seed, long offset) {
        int c0 = (int) offset;
        int c1 = (int) (offset >>> 32);
        int c2 = 0;
        int c3 = 0;
        int k0 = (int) seed;
        int k1 = (int) (seed >>> 32);
        for (int round = 0; round < 10; round++) {
            if (round > 0) {
                k0 += W0;
                k1 += W1;
            }
            long p0 = (M0 & 0xFFFFFFFFL) * (c0 & 0xFFFFFFFFL);
            long p1 = (M1 & 0xFFFFFFFFL) * (c2 & 0xFFFFFFFFL);
            int hi0 = (int) (p0 >>> 32);
            int lo0 = (int) p0;
            int hi1 = (int) (p1 >>> 32);
            int lo1 = (int) p1;
            int n0 = hi1 ^ c1 ^ k0;
            int n2 = hi0 ^ c3 ^ k1;
            c0 = n0;
            c1 = lo1;
            c2 = n2;
            c3 = lo0;
        }
        return new int[] {c0, c1, c2, c3};
    }

    /** A uniform float in [0, 1) from the top 24 bits of the first output. */
    public static float uniform(long seed, long offset) {
        return (block(seed, offset)[0] >>> 8) * 0x1.0p-24f;
    }
}
