package org.mstar.device;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Random;
import org.junit.jupiter.api.Test;

class HalfFloatsTest {

    private static short bf16(float f) {
        return HalfFloats.floatToBf16(f);
    }

    private static short f16(float f) {
        return HalfFloats.floatToF16(f);
    }

    private static float bits(int b) {
        return Float.intBitsToFloat(b);
    }

    @Test
    void bf16KnownPatterns() {
        assertThat(bf16(1f)).isEqualTo((short) 0x3F80);
        assertThat(bf16(-2f)).isEqualTo((short) 0xC000);
        assertThat(bf16(-0f)).isEqualTo((short) 0x8000);
        assertThat(bf16(3.140625f)).isEqualTo((short) 0x4049); // exactly representable
        // ties to even: 1 + 2^-8 lies halfway between 0x3F80 (even) and 0x3F81
        assertThat(bf16(1f + 0x1.0p-8f)).isEqualTo((short) 0x3F80);
        // 1 + 3·2^-8 lies halfway between 0x3F81 and 0x3F82 (even)
        assertThat(bf16(1f + 0x3.0p-8f)).isEqualTo((short) 0x3F82);
        // just above the tie rounds up
        assertThat(bf16(bits(0x3F808001))).isEqualTo((short) 0x3F81);
        // overflow: the largest float is past bf16's largest finite value plus half an ulp
        assertThat(bf16(Float.MAX_VALUE)).isEqualTo((short) 0x7F80);
        assertThat(bf16(bits(0x7F7F7FFF))).isEqualTo((short) 0x7F7F);
        assertThat(bf16(Float.POSITIVE_INFINITY)).isEqualTo((short) 0x7F80);
        assertThat(bf16(Float.NEGATIVE_INFINITY)).isEqualTo((short) 0xFF80);
        // NaN stays NaN (quiet), even a signalling one whose payload sits below bit 16
        assertThat(bf16(Float.NaN)).isEqualTo((short) 0x7FC0);
        assertThat(Float.isNaN(HalfFloats.bf16ToFloat(bf16(bits(0x7F800001))))).isTrue();
        assertThat(bf16(bits(0xFF800001)) & 0x8000).isEqualTo(0x8000);
        // bf16 keeps fp32's exponent range, so fp32 subnormals round like any other value
        assertThat(bf16(bits(0x00010000))).isEqualTo((short) 0x0001);
        assertThat(bf16(bits(0x00000001))).isEqualTo((short) 0x0000);
        assertThat(bf16(bits(0x00008000))).isEqualTo((short) 0x0000); // tie, even
        assertThat(bf16(bits(0x00018000))).isEqualTo((short) 0x0002); // tie, even
        assertThat(HalfFloats.bf16ToFloat((short) 0x0001)).isEqualTo(bits(0x00010000));
    }

    @Test
    void everyBf16PatternRoundTrips() {
        for (int b = 0; b < 0x10000; b++) {
            float f = HalfFloats.bf16ToFloat((short) b);
            boolean ok = Float.floatToRawIntBits(f) == b << 16
                    && (Float.isNaN(f) ? Float.isNaN(HalfFloats.bf16ToFloat(bf16(f))) : (bf16(f) & 0xFFFF) == b);
            assertThat(ok).as("pattern %04x", b).isTrue();
        }
    }

    /** Nearest of the two bf16 values bracketing f (by truncation), ties to the even pattern. */
    private static int expectedBf16(int fBits) {
        int lower = fBits >>> 16;
        int upper = lower + 1;
        double f = Float.intBitsToFloat(fBits);
        double lo = Float.intBitsToFloat(lower << 16);
        // past the largest finite bf16 the upper neighbour is infinity, which rounds like 2^128
        double hi = (upper & 0x7FFF) == 0x7F80 ? Math.copySign(0x1.0p128, f) : Float.intBitsToFloat(upper << 16);
        double dLo = Math.abs(f - lo);
        double dHi = Math.abs(hi - f);
        if (dLo != dHi) {
            return dLo < dHi ? lower : upper;
        }
        return (lower & 1) == 0 ? lower : upper;
    }

    @Test
    void bf16RoundsToNearestEvenOnRandomFloats() {
        Random rnd = new Random(1);
        for (int i = 0; i < 300_000; i++) {
            int b = rnd.nextInt();
            if (i % 4 == 0) {
                b = (b & 0xFFFF0000) | 0x8000; // exact ties
            }
            if (Float.isNaN(bits(b))) {
                continue;
            }
            int got = bf16(bits(b)) & 0xFFFF;
            if (got != expectedBf16(b)) {
                assertThat(got).as("bits %08x", b).isEqualTo(expectedBf16(b));
            }
        }
    }

    @Test
    void f16KnownPatterns() {
        assertThat(f16(1f)).isEqualTo((short) 0x3C00);
        assertThat(f16(-2f)).isEqualTo((short) 0xC000);
        assertThat(f16(-0f)).isEqualTo((short) 0x8000);
        assertThat(f16(65504f)).isEqualTo((short) 0x7BFF);
        assertThat(f16(65519.996f)).isEqualTo((short) 0x7BFF);
        assertThat(f16(65520f)).isEqualTo((short) 0x7C00); // halfway to 2^16: ties to even is infinity
        assertThat(f16(1e6f)).isEqualTo((short) 0x7C00);
        assertThat(f16(Float.NEGATIVE_INFINITY)).isEqualTo((short) 0xFC00);
        assertThat(f16(1f + 0x1.0p-11f)).isEqualTo((short) 0x3C00); // tie, even
        assertThat(f16(1f + 0x3.0p-11f)).isEqualTo((short) 0x3C02); // tie, even
        assertThat(f16(0x1.0p-14f)).isEqualTo((short) 0x0400); // smallest normal
        assertThat(f16(0x1.0p-14f - 0x1.0p-24f)).isEqualTo((short) 0x03FF); // largest subnormal
        assertThat(f16(0x1.0p-14f - 0x1.0p-25f)).isEqualTo((short) 0x0400); // tie carries into the exponent
        assertThat(f16(0x1.0p-24f)).isEqualTo((short) 0x0001); // smallest subnormal
        assertThat(f16(0x1.0p-25f)).isEqualTo((short) 0x0000); // tie, even
        assertThat(f16(0x3.0p-26f)).isEqualTo((short) 0x0001);
        assertThat(f16(0x3.0p-25f)).isEqualTo((short) 0x0002); // 1.5 ulp: tie, even
        assertThat(f16(-0x1.0p-26f)).isEqualTo((short) 0x8000);
        assertThat(f16(Float.NaN) & 0x7C00).isEqualTo(0x7C00);
        assertThat(f16(Float.NaN) & 0x03FF).isNotZero();
        assertThat(HalfFloats.f16ToFloat((short) 0x0001)).isEqualTo(0x1.0p-24f);
        assertThat(HalfFloats.f16ToFloat((short) 0x7BFF)).isEqualTo(65504f);
        assertThat(HalfFloats.f16ToFloat((short) 0xFC00)).isEqualTo(Float.NEGATIVE_INFINITY);
        assertThat(Float.isNaN(HalfFloats.f16ToFloat((short) 0x7E00))).isTrue();
    }

    @Test
    void everyF16PatternRoundTrips() {
        for (int h = 0; h < 0x10000; h++) {
            float f = HalfFloats.f16ToFloat((short) h);
            boolean isNanPattern = (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
            boolean ok = Float.isNaN(f) == isNanPattern
                    && (isNanPattern ? Float.isNaN(HalfFloats.f16ToFloat(f16(f))) : (f16(f) & 0xFFFF) == h);
            assertThat(ok).as("pattern %04x", h).isTrue();
        }
    }

    /**
     * Every finite non-negative f16 value, in order (their patterns are ordered like their values), then
     * infinity's pattern standing for 2^16: IEEE rounds past the largest finite value as if the exponent
     * range went on.
     */
    private static final double[] F16_VALUES = new double[0x7C01];

    static {
        F16_VALUES[0x7C00] = 0x1.0p16;
        for (int h = 0; h < 0x7C00; h++) {
            int exp = h >>> 10;
            int mant = h & 0x3FF;
            F16_VALUES[h] = exp == 0 ? mant * 0x1.0p-24 : (1024 + mant) * Math.scalb(1.0, exp - 25);
        }
    }

    /** Nearest f16 by search over all values, ties to the even pattern. */
    private static int expectedF16(float f) {
        int sign = f < 0 || (f == 0 && 1 / f < 0) ? 0x8000 : 0;
        double a = Math.abs((double) f);
        if (a >= 0x1.0p16) {
            return sign | 0x7C00;
        }
        int idx = java.util.Arrays.binarySearch(F16_VALUES, a);
        if (idx >= 0) {
            return sign | idx;
        }
        int upper = -idx - 1;
        int lower = upper - 1;
        double dLo = a - F16_VALUES[lower];
        double dHi = F16_VALUES[upper] - a;
        if (dLo != dHi) {
            return sign | (dLo < dHi ? lower : upper);
        }
        return sign | ((lower & 1) == 0 ? lower : upper);
    }

    @Test
    void f16RoundsToNearestEvenOnRandomFloats() {
        Random rnd = new Random(2);
        for (int i = 0; i < 300_000; i++) {
            // exponents from far below the subnormals to past the overflow threshold
            int exp = 127 - 30 + rnd.nextInt(50);
            int b = (rnd.nextBoolean() ? 0x80000000 : 0) | (exp << 23) | (rnd.nextInt() & 0x7FFFFF);
            if (i % 4 == 0) {
                b &= ~0x1FFF; // on or near f16 ties
                b |= 0x1000;
            }
            float f = bits(b);
            int got = f16(f) & 0xFFFF;
            if (got != expectedF16(f)) {
                assertThat(got).as("float %s (%08x)", f, b).isEqualTo(expectedF16(f));
            }
        }
    }
}
