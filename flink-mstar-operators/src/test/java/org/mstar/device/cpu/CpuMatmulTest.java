package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.device.cpu.OpsTestSupport.assertClose;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.mstar.device.DType;
import org.mstar.device.HalfFloats;

class CpuMatmulTest {
    private static final CpuDevice SERIAL = new CpuDevice(1);
    private static final CpuDevice PARALLEL = new CpuDevice(4);

    @AfterAll
    static void close() {
        SERIAL.close();
        PARALLEL.close();
    }

    /** What a weight keeps once stored in {@code dtype}. */
    private static float[] stored(float[] v, DType dtype) {
        float[] out = v.clone();
        for (int i = 0; i < out.length; i++) {
            out[i] = switch (dtype) {
                case BF16 -> HalfFloats.roundBf16(v[i]);
                case F16 -> HalfFloats.roundF16(v[i]);
                default -> v[i];
            };
        }
        return out;
    }

    private static double[] expected(float[] x, float[] w, float[] bias, int m, int n, int k) {
        double[] out = new double[m * n];
        for (int r = 0; r < m; r++) {
            for (int c = 0; c < n; c++) {
                double s = bias == null ? 0 : bias[c];
                for (int i = 0; i < k; i++) {
                    s += (double) x[r * k + i] * w[c * k + i];
                }
                out[r * n + c] = s;
            }
        }
        return out;
    }

    private static float[] run(CpuDevice device, float[] x, DType xType, float[] w, DType wType, float[] bias,
                               DType outType, int m, int n, int k) {
        CpuTensor xt = device.fromFloats(x, xType, m, k);
        CpuTensor wt = device.fromFloats(w, wType, n, k);
        CpuTensor bt = bias == null ? null : device.fromFloats(bias, DType.F32, n);
        CpuTensor out = device.allocate(outType, m, n);
        device.ops().matmul(xt, wt, bt, out);
        return device.toFloats(out);
    }

    /** Rows 1-7 take the dot-product path, 8 and more the panel path; N, K and M leave ragged tails. */
    @ParameterizedTest
    @CsvSource({"1, 133, 300", "3, 70, 37", "4, 9, 19", "10, 300, 64", "8, 65, 257", "33, 133, 300", "5, 4, 1",
            "12, 1, 513"})
    void f32ActivationsAgainstEveryWeightType(int m, int n, int k) {
        Random rnd = new Random(31L * m + n + k);
        float[] x = randomFloats(rnd, m * k, 1.0);
        float[] bias = randomFloats(rnd, n, 1.0);
        for (DType wType : new DType[] {DType.F32, DType.BF16, DType.F16}) {
            float[] w = randomFloats(rnd, n * k, 0.5);
            double[] want = expected(x, stored(w, wType), bias, m, n, k);
            float[] got = run(SERIAL, x, DType.F32, w, wType, bias, DType.F32, m, n, k);
            assertClose(want, got, 1e-5);
            assertThat(run(PARALLEL, x, DType.F32, w, wType, bias, DType.F32, m, n, k)).isEqualTo(got);
            assertClose(expected(x, stored(w, wType), null, m, n, k),
                    run(PARALLEL, x, DType.F32, w, wType, null, DType.F32, m, n, k), 1e-5);
        }
    }

    /**
     * Each output is the fp32 sum of products in order of k, then the bias: exactly this loop, whichever
     * path and however many rows share the call.
     */
    @Test
    void sumsInOrderSoRowsDoNotDependOnTheBatch() {
        Random rnd = new Random(5);
        int m = 37;
        int n = 97;
        int k = 600;
        float[] x = randomFloats(rnd, m * k, 1.0);
        float[] w = randomFloats(rnd, n * k, 1.0);
        float[] bias = randomFloats(rnd, n, 1.0);
        float[] batch = run(PARALLEL, x, DType.F32, w, DType.BF16, bias, DType.F32, m, n, k);
        float[] wb = stored(w, DType.BF16);
        for (int r = 0; r < m; r++) {
            float[] row = new float[k];
            System.arraycopy(x, r * k, row, 0, k);
            float[] alone = run(PARALLEL, row, DType.F32, w, DType.BF16, bias, DType.F32, 1, n, k);
            for (int c = 0; c < n; c++) {
                float acc = 0f;
                for (int i = 0; i < k; i++) {
                    acc += row[i] * wb[c * k + i];
                }
                float want = acc + bias[c];
                assertThat(batch[r * n + c]).isEqualTo(want);
                assertThat(alone[c]).isEqualTo(want);
            }
        }
    }

    @Test
    void bf16ActivationsAndOutputRoundOnce() {
        Random rnd = new Random(9);
        for (int m : new int[] {2, 16}) {
            int n = 50;
            int k = 130;
            float[] x = CpuDevice.roundedToBf16(randomFloats(rnd, m * k, 1.0));
            float[] w = randomFloats(rnd, n * k, 0.5);
            float[] bias = randomFloats(rnd, n, 1.0);
            double[] want = expected(x, stored(w, DType.BF16), bias, m, n, k);
            assertClose(want, run(SERIAL, x, DType.BF16, w, DType.BF16, bias, DType.BF16, m, n, k), 1e-2);
            float[] f32Out = run(SERIAL, x, DType.BF16, w, DType.F16, bias, DType.F32, m, n, k);
            assertClose(expected(x, stored(w, DType.F16), bias, m, n, k), f32Out, 1e-5);
            // the bf16 output is the fp32 result rounded once
            float[] bf16Out = run(SERIAL, x, DType.BF16, w, DType.F16, bias, DType.BF16, m, n, k);
            for (int i = 0; i < f32Out.length; i++) {
                assertThat(bf16Out[i]).isEqualTo(HalfFloats.roundBf16(f32Out[i]));
            }
        }
    }

    @Test
    void acceptsViewsAndHigherRankActivations() {
        Random rnd = new Random(13);
        int k = 24;
        int n = 10;
        float[] all = randomFloats(rnd, 6 * k, 1.0);
        float[] w = randomFloats(rnd, n * k, 1.0);
        CpuTensor x = SERIAL.fromFloats(all, DType.F32, 2, 3, k);
        CpuTensor view = (CpuTensor) SERIAL.fromFloats(all, DType.F32, 6, k).rows(2, 3);
        CpuTensor out3 = SERIAL.allocate(DType.F32, 2, 3, n);
        CpuTensor outView = SERIAL.allocate(DType.F32, 3, n);
        SERIAL.ops().matmul(x, SERIAL.fromFloats(w, DType.F32, n, k), null, out3);
        SERIAL.ops().matmul(view, SERIAL.fromFloats(w, DType.F32, n, k), null, outView);
        float[] full = SERIAL.toFloats(out3);
        float[] part = SERIAL.toFloats(outView);
        for (int i = 0; i < 3 * n; i++) {
            assertThat(part[i]).isEqualTo(full[2 * n + i]);
        }
        assertClose(expected(all, w, null, 6, n, k), full, 1e-5);
    }
}
