package org.mstar.model;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Random;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.mstar.device.Float8E4m3;

class Fp8QuantizerTest {
    @Provide
    Arbitrary<Fp8Quantization> layouts() {
        return Arbitraries.of(Fp8Quantization.blocks(16, 32, List.of()), Fp8Quantization.blocks(128, 128, List.of()),
                Fp8Quantization.channels(List.of()), Fp8Quantization.perTensor(List.of()));
    }

    @Property(tries = 200)
    void everyElementComesBackWithinHalfAnFp8StepOfItsScaledValue(@ForAll("layouts") Fp8Quantization q,
            @ForAll @IntRange(min = 1, max = 70) int rows, @ForAll @IntRange(min = 1, max = 150) int cols,
            @ForAll long seed) {
        Random rnd = new Random(seed);
        float[] w = new float[rows * cols];
        for (int i = 0; i < w.length; i++) {
            // magnitudes spread over 2^-20..2^4 so that blocks hold subnormal codes as well as normal ones
            w[i] = (float) (rnd.nextGaussian() * Math.pow(2, -20 + rnd.nextInt(25)));
        }
        Fp8Quantizer.Quantised quantised = Fp8Quantizer.quantise(w, rows, cols, q);

        long[] shape = q.scaleShape(rows, cols);
        assertThat(quantised.scales()).hasSize((int) (shape.length == 1 ? shape[0] : shape[0] * shape[1]));
        float[] amax = new float[quantised.scales().length];
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                int s = q.scaleIndex(r, c, cols);
                amax[s] = Math.max(amax[s], Math.abs(w[r * cols + c]));
            }
        }
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                int k = r * cols + c;
                float scale = quantised.scales()[q.scaleIndex(r, c, cols)];
                double back = Fp8Quantizer.dequantise(quantised.codes()[k], scale);
                // half a step of 3 mantissa bits, or of the subnormal spacing 2^-9, plus the fp32 roundings
                double bound = Math.max(Math.abs(w[k]) * 0x1.0p-4, scale * 0x1.0p-10) * (1 + 0x1.0p-20);
                assertThat(Math.abs(back - w[k])).as("element (%d, %d)", r, c).isLessThanOrEqualTo(bound);
                if (Math.abs(w[k]) == amax[q.scaleIndex(r, c, cols)] && w[k] != 0) {
                    assertThat(Math.abs(Float8E4m3.decode(quantised.codes()[k]))).as("largest of its block")
                            .isEqualTo(Float8E4m3.MAX);
                }
            }
        }
    }
}
