package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;
import static org.mstar.device.cpu.OpsTestSupport.assertClose;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.ComputeOps;
import org.mstar.device.ProjectionOps;
import org.mstar.device.DType;
import org.mstar.device.HalfFloats;

/** LayerNorm, exact GELU and conv1d against plain double-precision loops of PyTorch's formulas, on odd sizes. */
class CpuEncoderOpsTest {
    private static final CpuDevice DEVICE = new CpuDevice(3);

    @AfterAll
    static void close() {
        DEVICE.close();
    }

    // ---- LayerNorm ----

    /** nn.LayerNorm: biased variance, (x − mean) / sqrt(var + eps) · w + b, in double; a null bias is zero. */
    private static double[] expectedLayerNorm(float[] x, float[] w, float[] b, float eps, int rows, int hidden) {
        double[] out = new double[x.length];
        for (int r = 0; r < rows; r++) {
            double mean = 0;
            for (int h = 0; h < hidden; h++) {
                mean += x[r * hidden + h];
            }
            mean /= hidden;
            double var = 0;
            for (int h = 0; h < hidden; h++) {
                double d = x[r * hidden + h] - mean;
                var += d * d;
            }
            var /= hidden;
            double inv = 1 / Math.sqrt(var + eps);
            for (int h = 0; h < hidden; h++) {
                out[r * hidden + h] = (x[r * hidden + h] - mean) * inv * w[h] + (b == null ? 0 : b[h]);
            }
        }
        return out;
    }

    /** Rows with a large common offset, so that a one-pass E[x²] − E[x]² variance would lose most of its digits. */
    private static float[] offsetRows(Random rnd, int rows, int hidden) {
        float[] x = randomFloats(rnd, rows * hidden, 1.0);
        for (int r = 0; r < rows; r++) {
            float offset = (float) (rnd.nextGaussian() * 50);
            for (int h = 0; h < hidden; h++) {
                x[r * hidden + h] += offset;
            }
        }
        return x;
    }

    @Test
    void layerNormMatchesTorchFormulaOnOddSizesWithAndWithoutBias() {
        Random rnd = new Random(11);
        int rows = 13;
        int hidden = 383;
        float[] x = offsetRows(rnd, rows, hidden);
        float[] w = randomFloats(rnd, hidden, 1.0);
        float[] b = randomFloats(rnd, hidden, 1.0);
        CpuTensor out = DEVICE.allocate(DType.F32, rows, hidden);
        DEVICE.ops().layerNorm(DEVICE.fromFloats(x, DType.F32, rows, hidden), null, DEVICE.fromFloats(w, DType.F32, hidden),
                DEVICE.fromFloats(b, DType.F32, hidden), 1e-5f, out);
        assertClose(expectedLayerNorm(x, w, b, 1e-5f, rows, hidden), DEVICE.toFloats(out), 1e-5);

        DEVICE.ops().layerNorm(DEVICE.fromFloats(x, DType.F32, rows, hidden), null, DEVICE.fromFloats(w, DType.F32, hidden),
                null, 1e-5f, out);
        assertClose(expectedLayerNorm(x, w, null, 1e-5f, rows, hidden), DEVICE.toFloats(out), 1e-5);
    }

    @Test
    void layerNormOfBf16ActivationsRoundsOnceAndRunsInPlace() {
        Random rnd = new Random(12);
        int rows = 7;
        int hidden = 250;
        float[] xb = CpuDevice.roundedToBf16(randomFloats(rnd, rows * hidden, 3.0));
        float[] wb = CpuDevice.roundedToBf16(randomFloats(rnd, hidden, 1.0));
        float[] bb = CpuDevice.roundedToBf16(randomFloats(rnd, hidden, 1.0));
        CpuTensor x = DEVICE.fromFloats(xb, DType.BF16, rows, hidden);
        DEVICE.ops().layerNorm(x, null, DEVICE.fromFloats(wb, DType.BF16, hidden), DEVICE.fromFloats(bb, DType.BF16, hidden),
                1e-5f, x);
        double[] want = expectedLayerNorm(xb, wb, bb, 1e-5f, rows, hidden);
        float[] got = DEVICE.toFloats(x);
        for (int i = 0; i < got.length; i++) {
            assertThat(HalfFloats.roundBf16(got[i])).isEqualTo(got[i]);
        }
        assertClose(want, got, 1e-2);
    }

    @Test
    void layerNormFusesTheResidualAddAndNormalisesTheStoredSum() {
        Random rnd = new Random(13);
        int rows = 5;
        int hidden = 129;
        float[] x = CpuDevice.roundedToBf16(randomFloats(rnd, rows * hidden, 1.0));
        float[] res = CpuDevice.roundedToBf16(offsetRows(rnd, rows, hidden));
        float[] w = randomFloats(rnd, hidden, 1.0);
        float[] b = randomFloats(rnd, hidden, 1.0);
        for (DType resType : new DType[] {DType.F32, DType.BF16}) {
            CpuTensor resT = DEVICE.fromFloats(res, resType, rows, hidden);
            CpuTensor out = DEVICE.allocate(DType.F32, rows, hidden);
            DEVICE.ops().layerNorm(DEVICE.fromFloats(x, DType.BF16, rows, hidden), resT,
                    DEVICE.fromFloats(w, DType.F32, hidden), DEVICE.fromFloats(b, DType.F32, hidden), 1e-5f, out);
            float[] sum = new float[x.length];
            for (int i = 0; i < x.length; i++) {
                sum[i] = resType == DType.BF16 ? HalfFloats.roundBf16(res[i] + x[i]) : res[i] + x[i];
            }
            assertThat(DEVICE.toFloats(resT)).as("residual stream of %s", resType).isEqualTo(sum);
            assertClose(expectedLayerNorm(sum, w, b, 1e-5f, rows, hidden), DEVICE.toFloats(out), 1e-5);
        }
    }

    @Test
    void layerNormRefusesMismatchedParameters() {
        CpuTensor x = DEVICE.allocate(DType.F32, 3, 8);
        assertThatThrownBy(() -> DEVICE.ops().layerNorm(x, null, DEVICE.allocate(DType.F32, 8),
                DEVICE.allocate(DType.F32, 7), 1e-5f, DEVICE.allocate(DType.F32, 3, 8)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("bias of 7");
    }

    // ---- GELU ----

    /** erf by its Maclaurin series in double: independent of the op's method, and exact to ~1e-14 for |z| <= 2.2. */
    private static double erfSeries(double z) {
        double term = z;
        double sum = z;
        for (int n = 1; n < 200; n++) {
            term *= -z * z / n;
            sum += term / (2 * n + 1);
        }
        return 2 / Math.sqrt(Math.PI) * sum;
    }

    @Test
    void geluMatchesTheErfFormulaOnRandomValues() {
        Random rnd = new Random(14);
        int n = 10_007;
        float[] x = randomFloats(rnd, n, 1.6);
        double[] want = new double[n];
        for (int i = 0; i < n; i++) {
            // |x| <= 3 keeps x/√2 where the series is exact; the far tail is checked against tables below
            x[i] = Math.max(-3f, Math.min(3f, x[i]));
            want[i] = 0.5 * x[i] * (1 + erfSeries(x[i] / Math.sqrt(2)));
        }
        CpuTensor out = DEVICE.allocate(DType.F32, n);
        DEVICE.ops().gelu(DEVICE.fromFloats(x, DType.F32, n), out);
        float[] got = DEVICE.toFloats(out);
        for (int i = 0; i < n; i++) {
            // relative to each value (no RMS floor): the small negative tail must be right too
            assertThat((double) got[i]).as("gelu(%s)", x[i]).isCloseTo(want[i], within(3e-7 * Math.abs(want[i])));
        }
    }

    @Test
    void geluKeepsItsRelativeAccuracyOnTheNegativeTail() {
        // x · Φ(x) with Φ from tables of the normal distribution
        float[] x = {-1f, -2f, -3f, -5f, 1f, 2f, 0.5f, 0f};
        double[] phi = {0.158655253931457, 0.022750131948179, 0.001349898031630, 2.866515718791939e-7,
            0.841344746068543, 0.977249868051821, 0.691462461274013, 0.5};
        CpuTensor t = DEVICE.fromFloats(x, DType.F32, x.length);
        DEVICE.ops().gelu(t, t);
        float[] got = DEVICE.toFloats(t);
        for (int i = 0; i < x.length; i++) {
            double want = x[i] * phi[i];
            assertThat((double) got[i]).as("gelu(%s)", x[i])
                    .isCloseTo(want, within(3e-7 * Math.abs(want)));
        }
    }

    @Test
    void geluOfBf16RoundsTheFp32ResultOnce() {
        Random rnd = new Random(15);
        int n = 999;
        float[] xb = CpuDevice.roundedToBf16(randomFloats(rnd, n, 2.0));
        CpuTensor f32 = DEVICE.allocate(DType.F32, n);
        CpuTensor bf16 = DEVICE.allocate(DType.BF16, n);
        DEVICE.ops().gelu(DEVICE.fromFloats(xb, DType.BF16, n), f32);
        DEVICE.ops().gelu(DEVICE.fromFloats(xb, DType.BF16, n), bf16);
        float[] wide = DEVICE.toFloats(f32);
        float[] narrow = DEVICE.toFloats(bf16);
        for (int i = 0; i < n; i++) {
            assertThat(narrow[i]).isEqualTo(HalfFloats.roundBf16(wide[i]));
        }
    }

    // ---- conv1d ----

    /** PyTorch's Conv1d on [channels, frames], written on frames-major x and out: the definition, in double. */
    private static double[] expectedConv(float[] x, int frames, int channels, float[] w, int outChannels, int kernel,
            float[] bias, int stride, int padding, int outFrames) {
        double[] out = new double[outFrames * outChannels];
        for (int t = 0; t < outFrames; t++) {
            for (int o = 0; o < outChannels; o++) {
                double acc = bias == null ? 0 : bias[o];
                for (int c = 0; c < channels; c++) {
                    for (int k = 0; k < kernel; k++) {
                        int src = t * stride + k - padding;
                        if (src >= 0 && src < frames) {
                            acc += (double) w[(o * channels + c) * kernel + k] * x[src * channels + c];
                        }
                    }
                }
                out[t * outChannels + o] = acc;
            }
        }
        return out;
    }

    private static void checkConv(Random rnd, int frames, int channels, int outChannels, int kernel, int stride,
            int padding, boolean withBias, DType dtype) {
        float[] x = randomFloats(rnd, frames * channels, 1.0);
        float[] w = randomFloats(rnd, outChannels * channels * kernel, 0.3);
        float[] bias = withBias ? randomFloats(rnd, outChannels, 1.0) : null;
        if (dtype == DType.BF16) {
            x = CpuDevice.roundedToBf16(x);
            w = CpuDevice.roundedToBf16(w);
            bias = bias == null ? null : CpuDevice.roundedToBf16(bias);
        }
        int outFrames = ProjectionOps.conv1dOutFrames(frames, kernel, stride, padding);
        CpuTensor out = DEVICE.allocate(dtype, outFrames, outChannels);
        DEVICE.ops().conv1d(DEVICE.fromFloats(x, dtype, frames, channels),
                DEVICE.fromFloats(w, dtype, outChannels, channels, kernel),
                bias == null ? null : DEVICE.fromFloats(bias, dtype, outChannels), stride, padding, out);
        assertClose(expectedConv(x, frames, channels, w, outChannels, kernel, bias, stride, padding, outFrames),
                DEVICE.toFloats(out), dtype == DType.BF16 ? 1e-2 : 1e-5);
    }

    @Test
    void conv1dMatchesTheDefinitionForWhisperStemShapesAtOddSizes() {
        Random rnd = new Random(16);
        for (DType dt : new DType[] {DType.F32, DType.BF16}) {
            checkConv(rnd, 37, 5, 7, 3, 1, 1, true, dt);   // conv1: same length
            checkConv(rnd, 37, 7, 7, 3, 2, 1, true, dt);   // conv2: halves (odd input: 19 frames)
            checkConv(rnd, 4, 3, 6, 3, 2, 1, false, dt);   // fewer output rows than a matmul panel
        }
        checkConv(rnd, 23, 4, 5, 5, 3, 0, true, DType.F32); // wider kernel, stride 3, no padding
        checkConv(rnd, 11, 2, 3, 1, 1, 0, false, DType.F32); // kernel 1: a plain projection
    }

    @Test
    void conv1dOutputFramesFollowTheConvolutionArithmetic() {
        assertThat(ProjectionOps.conv1dOutFrames(3000, 3, 1, 1)).isEqualTo(3000);
        assertThat(ProjectionOps.conv1dOutFrames(3000, 3, 2, 1)).isEqualTo(1500);
        assertThat(ProjectionOps.conv1dOutFrames(3001, 3, 2, 1)).isEqualTo(1501);
        assertThatThrownBy(() -> ProjectionOps.conv1dOutFrames(1, 5, 1, 1)).hasMessageContaining("shorter than the kernel");
        assertThatThrownBy(() -> ProjectionOps.conv1dOutFrames(10, 3, 0, 1)).hasMessageContaining("stride >= 1");
    }

    @Test
    void conv1dRefusesMismatchedShapes() {
        CpuTensor x = DEVICE.allocate(DType.F32, 10, 4);
        CpuTensor w = DEVICE.allocate(DType.F32, 6, 4, 3);
        assertThatThrownBy(() -> DEVICE.ops().conv1d(x, w, null, 2, 1, DEVICE.allocate(DType.F32, 10, 6)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("should be [5, 6]");
        assertThatThrownBy(() -> DEVICE.ops().conv1d(x, DEVICE.allocate(DType.F32, 6, 5, 3), null, 1, 1,
                DEVICE.allocate(DType.F32, 10, 6))).hasMessageContaining("inChannels");
    }
}
