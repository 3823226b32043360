package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.Tensor;

/**
 * {@code moeExperts} against the dense ops it stands for: per row and choice, the expert's gate/up projection with
 * SiLU·mul ({@code gateUpActivation} on the expert's slice of the stack) and its down projection, weighed and summed.
 * A row's result must not depend on the rows beside it.
 */
class CpuMoeExpertsTest {
    private static final CpuDevice DEVICE = new CpuDevice(2);
    private static final int EXPERTS = 6;
    private static final int HIDDEN = 40;
    private static final int INTER = 24;
    private static final int TOP_K = 3;

    @AfterAll
    static void close() {
        DEVICE.close();
    }

    private record Layer(float[] gateUp, float[] down) {
        static Layer random(Random rnd) {
            return new Layer(randomFloats(rnd, EXPERTS * 2 * INTER * HIDDEN, 0.2),
                    randomFloats(rnd, EXPERTS * HIDDEN * INTER, 0.2));
        }

        float[] experts(DType dtype, float[] x, int[] ids, float[] weights) {
            int rows = ids.length / TOP_K;
            try (Tensor xs = DEVICE.fromFloats(x, dtype, rows, HIDDEN);
                 Tensor gu = DEVICE.fromFloats(gateUp, dtype, EXPERTS, 2 * INTER, HIDDEN);
                 Tensor dn = DEVICE.fromFloats(down, dtype, EXPERTS, HIDDEN, INTER);
                 Tensor id = DEVICE.fromInts(ids, rows, TOP_K);
                 Tensor w = DEVICE.fromFloats(weights, DType.F32, rows, TOP_K);
                 Tensor out = DEVICE.allocate(dtype, rows, HIDDEN)) {
                DEVICE.ops().moeExperts(xs, gu, dn, id, w, out);
                return DEVICE.toFloats(out);
            }
        }

        /** The same through gateUpActivation and matmul on one expert's weights at a time. */
        float[] dense(DType dtype, float[] x, int[] ids, float[] weights) {
            int rows = ids.length / TOP_K;
            float[] result = new float[rows * HIDDEN];
            try (Tensor gu = DEVICE.fromFloats(gateUp, dtype, EXPERTS * 2 * INTER, HIDDEN);
                 Tensor dn = DEVICE.fromFloats(down, dtype, EXPERTS * HIDDEN, INTER)) {
                for (int r = 0; r < rows; r++) {
                    float[] sum = new float[HIDDEN];
                    for (int j = 0; j < TOP_K; j++) {
                        int e = ids[r * TOP_K + j];
                        try (Tensor xs = DEVICE.fromFloats(Arrays.copyOfRange(x, r * HIDDEN, (r + 1) * HIDDEN), dtype, 1,
                                HIDDEN);
                             Tensor gateUpOut = DEVICE.allocate(dtype, 1, 2 * INTER);
                             Tensor h = DEVICE.allocate(dtype, 1, INTER);
                             Tensor y = DEVICE.allocate(DType.F32, 1, HIDDEN)) {
                            DEVICE.ops().gateUpActivation(xs, gu.rows((long) e * 2 * INTER, 2 * INTER), false, gateUpOut, h);
                            DEVICE.ops().matmul(h, dn.rows((long) e * HIDDEN, HIDDEN), null, y);
                            float[] ys = DEVICE.toFloats(y);
                            for (int o = 0; o < HIDDEN; o++) {
                                sum[o] += weights[r * TOP_K + j] * ys[o];
                            }
                        }
                    }
                    System.arraycopy(sum, 0, result, r * HIDDEN, HIDDEN);
                }
            }
            return dtype == DType.BF16 ? CpuDevice.roundedToBf16(result) : result;
        }
    }

    private static int[] randomIds(Random rnd, int rows) {
        int[] ids = new int[rows * TOP_K];
        for (int r = 0; r < rows; r++) {
            int[] perm = rnd.ints(0, EXPERTS).distinct().limit(TOP_K).toArray();
            System.arraycopy(perm, 0, ids, r * TOP_K, TOP_K);
        }
        return ids;
    }

    /** A random layer and {@code rows} rows routed to it. */
    private record Call(Layer layer, float[] x, int[] ids, float[] weights) {
        static Call random(long seed, int rows) {
            Random rnd = new Random(seed);
            return new Call(Layer.random(rnd), randomFloats(rnd, rows * HIDDEN, 1), randomIds(rnd, rows),
                    randomFloats(rnd, rows * TOP_K, 0.5));
        }
    }

    @Test
    void matchesTheDenseOpsOfEachChosenExpert() {
        Call c = Call.random(11, 9);
        for (DType dtype : new DType[] {DType.F32, DType.BF16}) {
            float[] got = c.layer().experts(dtype, c.x(), c.ids(), c.weights());
            float[] want = c.layer().dense(dtype, c.x(), c.ids(), c.weights());
            float tolerance = dtype == DType.F32 ? 1e-5f : 2e-2f;
            for (int i = 0; i < got.length; i++) {
                assertThat(got[i]).as("%s element %d", dtype, i).isCloseTo(want[i],
                        within(tolerance * (1 + Math.abs(want[i]))));
            }
        }
    }

    @Test
    void aRowsResultDoesNotDependOnTheOtherRows() {
        Call c = Call.random(12, 7);
        float[] batched = c.layer().experts(DType.BF16, c.x(), c.ids(), c.weights());
        int r = 4;
        float[] alone = c.layer().experts(DType.BF16, Arrays.copyOfRange(c.x(), r * HIDDEN, (r + 1) * HIDDEN),
                Arrays.copyOfRange(c.ids(), r * TOP_K, (r + 1) * TOP_K),
                Arrays.copyOfRange(c.weights(), r * TOP_K, (r + 1) * TOP_K));
        assertThat(Arrays.copyOfRange(batched, r * HIDDEN, (r + 1) * HIDDEN)).containsExactly(alone);
    }

    @Test
    void anExpertOutsideTheStackIsRefused() {
        Layer layer = Layer.random(new Random(13));
        assertThatThrownBy(() -> layer.experts(DType.F32, new float[HIDDEN], new int[] {0, EXPERTS, 1},
                new float[TOP_K])).isInstanceOf(IndexOutOfBoundsException.class).hasMessageContaining("expert 6");
    }
}
