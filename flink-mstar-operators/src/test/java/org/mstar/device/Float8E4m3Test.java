package org.mstar.device;

import static org.assertj.core.api.Assertions.assertThat;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.FloatRange;
import org.junit.jupiter.api.Test;

class Float8E4m3Test {
    /** The value of a code from its fields, as the OCP spec defines E4M3FN; NaN for the two NaN codes. */
    private static double specValue(int b) {
        int sign = b >>> 7;
        int e = (b >>> 3) & 0xF;
        int m = b & 0x7;
        if (e == 15 && m == 7) {
            return Double.NaN;
        }
        double magnitude = e == 0 ? Math.pow(2, -6) * (m / 8.0) : Math.pow(2, e - 7) * (1 + m / 8.0);
        return sign == 1 ? -magnitude : magnitude;
    }

    @Test
    void everyCodeDecodesToTheValueTheFormatDefines() {
        for (int b = 0; b < 256; b++) {
            double expected = specValue(b);
            float actual = Float8E4m3.decode((byte) b);
            if (Double.isNaN(expected)) {
                assertThat(actual).as("code %02x", b).isNaN();
            } else {
                assertThat((double) actual).as("code %02x", b).isEqualTo(expected);
                assertThat(Math.copySign(1f, actual)).as("sign of code %02x", b).isEqualTo(b < 0x80 ? 1f : -1f);
            }
        }
    }

    @Test
    void theFormatsLandmarksAreWhereTorchPutsThem() {
        assertThat(Float8E4m3.decode((byte) 0x7E)).isEqualTo(448f);
        assertThat(Float8E4m3.decode((byte) 0xFE)).isEqualTo(-448f);
        assertThat(Float8E4m3.decode((byte) 0x01)).isEqualTo(0x1.0p-9f);
        assertThat(Float8E4m3.decode((byte) 0x08)).isEqualTo(0x1.0p-6f);
        assertThat(Float8E4m3.decode((byte) 0x38)).isEqualTo(1f);
        assertThat(Float8E4m3.decode((byte) 0x7F)).isNaN();
        assertThat(Float8E4m3.decode((byte) 0xFF)).isNaN();
    }

    @Test
    void encodingADecodedValueGivesItsCodeBack() {
        for (int b = 0; b < 256; b++) {
            if ((b & 0x7F) != 0x7F) {
                assertThat(Float8E4m3.encode(Float8E4m3.decode((byte) b)) & 0xFF).as("code %02x", b).isEqualTo(b);
            }
        }
    }

    @Test
    void outOfRangeSaturatesTiesGoToEvenAndNanStaysNan() {
        assertThat(Float8E4m3.encode(1e6f)).isEqualTo((byte) 0x7E);
        assertThat(Float8E4m3.encode(Float.NEGATIVE_INFINITY)).isEqualTo((byte) 0xFE);
        assertThat(Float8E4m3.encode(Float.NaN) & 0x7F).isEqualTo(0x7F);
        // 1.0625 lies halfway between 1 (code 0x38, even) and 1.125 (0x39)
        assertThat(Float8E4m3.encode(1.0625f)).isEqualTo((byte) 0x38);
        // 1.1875 lies halfway between 1.125 (0x39) and 1.25 (0x3A, even)
        assertThat(Float8E4m3.encode(1.1875f)).isEqualTo((byte) 0x3A);
        // half the smallest subnormal rounds to zero (even), just above it to the subnormal
        assertThat(Float8E4m3.encode(0x1.0p-10f)).isEqualTo((byte) 0x00);
        assertThat(Float8E4m3.encode(Math.nextUp(0x1.0p-10f))).isEqualTo((byte) 0x01);
    }

    @Property(tries = 3000)
    void encodePicksTheNearestRepresentableValue(@ForAll @FloatRange(min = -460f, max = 460f) float v) {
        float chosen = Float8E4m3.decode(Float8E4m3.encode(v));
        double clamped = Math.max(-448.0, Math.min(448.0, v));
        double distance = Math.abs(chosen - clamped);
        for (int b = 0; b < 256; b++) {
            double candidate = specValue(b);
            if (!Double.isNaN(candidate)) {
                assertThat(distance).as("%s encodes to %s but %s is nearer", v, chosen, candidate)
                        .isLessThanOrEqualTo(Math.abs(candidate - clamped));
            }
        }
        assertThat(Math.copySign(1f, chosen)).isEqualTo(Math.copySign(1f, v));
    }

    @Property(tries = 1000)
    void tinyMagnitudesRoundToTheNearestSubnormal(@ForAll @FloatRange(min = 0f, max = 0.02f) float v) {
        double chosen = Float8E4m3.decode(Float8E4m3.encode(v));
        assertThat(Math.abs(chosen - v)).isLessThanOrEqualTo(0x1.0p-10);
    }
}
