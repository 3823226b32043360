package org.mstar.device;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

class Fp8RowsTest {
    @Property(tries = 300)
    void aRowComesBackWithinHalfAnFp8StepItsLargestAtTheTopCode(@ForAll @IntRange(min = 1, max = 300) int len,
                                                                 @ForAll long seed) {
        Random rnd = new Random(seed);
        float[] v = new float[len + 3];
        for (int i = 0; i < v.length; i++) {
            // magnitudes over 2^-20..2^8, so that a row holds subnormal codes as well as normal ones
            v[i] = (float) (rnd.nextGaussian() * Math.pow(2, -20 + rnd.nextInt(29)));
        }
        byte[] codes = new byte[len + 5];
        float scale = Fp8Rows.quantise(v, 3, len, codes, 5);

        float amax = 0f;
        for (int i = 0; i < len; i++) {
            amax = Math.max(amax, Math.abs(v[3 + i]));
        }
        assertThat(scale).isEqualTo(amax > 0 ? amax / Float8E4m3.MAX : 1f);
        for (int i = 0; i < len; i++) {
            float x = v[3 + i];
            byte code = codes[5 + i];
            assertThat(code).isEqualTo(Float8E4m3.encode(x / scale));
            double back = Float8E4m3.decode(code) * (double) scale;
            // half a step of 3 mantissa bits, or of the subnormal spacing 2^-9, plus the fp32 roundings
            double bound = Math.max(Math.abs(x) * 0x1.0p-4, scale * 0x1.0p-10) * (1 + 0x1.0p-20);
            assertThat(Math.abs(back - x)).as("element %d", i).isLessThanOrEqualTo(bound);
            if (Math.abs(x) == amax && x != 0) {
                assertThat(Math.abs(Float8E4m3.decode(code))).isEqualTo(Float8E4m3.MAX);
            }
        }
    }

    @Test
    void aRowOfZerosTakesScaleOneAndZeroCodes() {
        byte[] codes = {7, 7, 7};
        assertThat(Fp8Rows.quantise(new float[] {0f, -0f, 0f}, 0, 3, codes, 0)).isEqualTo(1f);
        assertThat(Float8E4m3.decode(codes[0])).isZero();
        assertThat(Float8E4m3.decode(codes[1])).isZero();
    }
}
