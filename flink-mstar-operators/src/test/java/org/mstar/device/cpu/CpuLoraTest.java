package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.Arrays;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.lifecycle.AfterContainer;
import org.mstar.device.DType;
import org.mstar.device.Tensor;

/**
 * {@code addLora}: each row gains its own slot's {@code scale · (x · Aᵀ) · Bᵀ} in the target columns, against a
 * double loop; rows of no adapter and the other columns stay as they were, bit for bit; and a row's result does not
 * depend on the rows beside it.
 */
class CpuLoraTest {
    private static final CpuDevice DEVICE = new CpuDevice(3);

    @AfterContainer
    static void close() {
        DEVICE.close();
    }

    /** One call's inputs: a stack of {@code slots} adapters of rank {@code rank} over x {@code [rows, k]}. */
    private record Call(int rows, int k, int n, int rank, int stack, int width, int outCol, float[] x, float[] a,
                        float[] b, float[] scales, int[] slots, float[] out) {
        static Call random(long seed, int rows, int k, int n, int rank, int stack, int pad) {
            Random rnd = new Random(seed);
            int[] slots = new int[rows];
            for (int i = 0; i < rows; i++) {
                slots[i] = rnd.nextInt(stack + 1) - 1; // -1: no adapter
            }
            float[] scales = new float[stack];
            for (int s = 0; s < stack; s++) {
                scales[s] = 0.25f + rnd.nextInt(8) * 0.5f;
            }
            int width = n + pad;
            return new Call(rows, k, n, rank, stack, width, pad / 2, randomFloats(rnd, rows * k, 1),
                    randomFloats(rnd, stack * rank * k, 0.3), randomFloats(rnd, stack * n * rank, 0.3), scales,
                    slots, randomFloats(rnd, rows * width, 1));
        }

        float[] run(DType dtype) {
            try (Tensor xs = DEVICE.fromFloats(x, dtype, rows, k);
                 Tensor as = DEVICE.fromFloats(a, dtype, stack, rank, k);
                 Tensor bs = DEVICE.fromFloats(b, dtype, stack, n, rank);
                 Tensor sc = DEVICE.fromFloats(scales, DType.F32, stack);
                 Tensor sl = DEVICE.fromInts(slots, rows);
                 Tensor o = DEVICE.fromFloats(out, DType.F32, rows, width)) {
                DEVICE.ops().addLora(xs, as, bs, sc, sl, o, outCol);
                return DEVICE.toFloats(o);
            }
        }
    }

    @Property(tries = 60)
    void eachRowGainsItsOwnAdaptersUpdate(@ForAll long seed, @ForAll @IntRange(min = 1, max = 9) int rows,
                                          @ForAll @IntRange(min = 1, max = 40) int k,
                                          @ForAll @IntRange(min = 1, max = 24) int n,
                                          @ForAll @IntRange(min = 1, max = 16) int rank,
                                          @ForAll @IntRange(min = 1, max = 4) int stack,
                                          @ForAll @IntRange(min = 0, max = 6) int pad) {
        Call c = Call.random(seed, rows, k, n, rank, stack, pad);
        float[] got = c.run(DType.F32);
        for (int i = 0; i < rows; i++) {
            int s = c.slots[i];
            for (int col = 0; col < c.width; col++) {
                int o = i * c.width + col;
                int j = col - c.outCol;
                if (s < 0 || j < 0 || j >= n) {
                    assertThat(got[o]).as("row %d column %d untouched", i, col).isEqualTo(c.out[o]);
                    continue;
                }
                double sum = 0;
                double magnitude = 0;
                for (int r = 0; r < rank; r++) {
                    double t = 0;
                    double tAbs = 0;
                    for (int q = 0; q < k; q++) {
                        double p = (double) c.x[i * k + q] * c.a[(s * rank + r) * k + q];
                        t += p;
                        tAbs += Math.abs(p);
                    }
                    double bv = c.b[(s * n + j) * rank + r];
                    sum += t * bv;
                    magnitude += tAbs * Math.abs(bv);
                }
                double want = c.out[o] + c.scales[s] * sum;
                double tol = 1e-5 * (Math.abs(c.out[o]) + c.scales[s] * magnitude);
                assertThat(Math.abs(got[o] - want)).as("row %d column %d", i, col).isLessThanOrEqualTo(tol);
            }
        }
    }

    @Property(tries = 30)
    void aRowsResultDoesNotDependOnTheRowsBesideIt(@ForAll long seed, @ForAll @IntRange(min = 2, max = 7) int rows) {
        Call c = Call.random(seed, rows, 24, 12, 8, 3, 4);
        float[] batched = c.run(DType.BF16);
        for (int i = 0; i < rows; i++) {
            Call alone = new Call(1, c.k, c.n, c.rank, c.stack, c.width, c.outCol,
                    Arrays.copyOfRange(c.x, i * c.k, (i + 1) * c.k), c.a, c.b, c.scales,
                    new int[] {c.slots[i]}, Arrays.copyOfRange(c.out, i * c.width, (i + 1) * c.width));
            assertThat(alone.run(DType.BF16))
                    .containsExactly(Arrays.copyOfRange(batched, i * c.width, (i + 1) * c.width));
        }
    }

    @Property(tries = 5)
    void aSlotOutsideTheStackIsRefused(@ForAll long seed) {
        Call c = Call.random(seed, 3, 8, 4, 2, 2, 0);
        c.slots[1] = 2;
        assertThatThrownBy(() -> c.run(DType.F32)).isInstanceOf(IndexOutOfBoundsException.class)
                .hasMessageContaining("slot 2");
    }
}
