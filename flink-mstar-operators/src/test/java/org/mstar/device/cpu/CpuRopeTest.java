package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;
import static org.mstar.device.cpu.OpsTestSupport.assertClose;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.RopeParams;

class CpuRopeTest {
    private static final CpuDevice DEVICE = new CpuDevice(3);

    @AfterAll
    static void close() {
        DEVICE.close();
    }

    /** The inverse frequency of pair i, written out from the spec (§6) independently of {@link RopeParams}. */
    private static double expectedInvFreq(RopeParams p, int i) {
        double inv = 1.0 / Math.pow(p.theta(), 2.0 * i / p.rotaryDim());
        if (!p.llama31()) {
            return inv / p.scale();
        }
        double wavelen = 2 * Math.PI / inv;
        if (wavelen < p.oldContextLen() / p.highFreqFactor()) {
            return inv;
        }
        if (wavelen > p.oldContextLen() / p.lowFreqFactor()) {
            return inv / p.scale();
        }
        double smooth = (p.oldContextLen() / wavelen - p.lowFreqFactor()) / (p.highFreqFactor() - p.lowFreqFactor());
        return (1 - smooth) * inv / p.scale() + smooth * inv;
    }

    /**
     * Rotate one tensor {@code [n, heads, headDim]} in double: angle = fp32 product of the position and
     * the fp32-rounded inverse frequency (the contract), everything after it exact.
     */
    private static double[] expectedRotation(float[] x, int n, int heads, int headDim, int[] pos, RopeParams p) {
        double[] out = new double[x.length];
        for (int e = 0; e < x.length; e++) {
            out[e] = x[e];
        }
        int half = p.rotaryDim() / 2;
        for (int t = 0; t < n; t++) {
            for (int h = 0; h < heads; h++) {
                int base = (t * heads + h) * headDim;
                for (int i = 0; i < half; i++) {
                    float angle = pos[t] * (float) expectedInvFreq(p, i);
                    double c = Math.cos(angle);
                    double s = Math.sin(angle);
                    int a = p.interleave() ? base + 2 * i : base + i;
                    int b = p.interleave() ? base + 2 * i + 1 : base + i + half;
                    out[a] = x[a] * c - x[b] * s;
                    out[b] = x[b] * c + x[a] * s;
                }
            }
        }
        return out;
    }

    private static void checkRope(RopeParams params, int headDim, DType dtype, double tol) {
        Random rnd = new Random(params.hashCode() + 31L * headDim + dtype.ordinal());
        int n = 23;
        int qHeads = 6;
        int kHeads = 2;
        float[] q = randomFloats(rnd, n * qHeads * headDim, 1.0);
        float[] k = randomFloats(rnd, n * kHeads * headDim, 1.0);
        if (dtype == DType.BF16) {
            q = CpuDevice.roundedToBf16(q);
            k = CpuDevice.roundedToBf16(k);
        }
        int[] pos = new int[n];
        for (int t = 0; t < n; t++) {
            pos[t] = t == 0 ? 0 : rnd.nextInt(9000);
        }
        CpuTensor qt = DEVICE.fromFloats(q, dtype, n, qHeads, headDim);
        CpuTensor kt = DEVICE.fromFloats(k, dtype, n, kHeads, headDim);
        DEVICE.ops().rope(qt, kt, DEVICE.fromInts(pos, n), params);

        float[] qOut = DEVICE.toFloats(qt);
        float[] kOut = DEVICE.toFloats(kt);
        assertClose(expectedRotation(q, n, qHeads, headDim, pos, params), qOut, tol);
        assertClose(expectedRotation(k, n, kHeads, headDim, pos, params), kOut, tol);
        // position 0 is the identity, and dims past rotaryDim pass through untouched
        for (int e = 0; e < qHeads * headDim; e++) {
            assertThat(qOut[e]).isEqualTo(q[e]);
        }
        for (int t = 0; t < n; t++) {
            for (int h = 0; h < qHeads; h++) {
                for (int d = params.rotaryDim(); d < headDim; d++) {
                    int e = (t * qHeads + h) * headDim + d;
                    assertThat(qOut[e]).isEqualTo(q[e]);
                }
            }
        }
    }

    @Test
    void neoxFullRotaryDim() {
        checkRope(RopeParams.standard(64, 10000), 64, DType.F32, 1e-5);
    }

    @Test
    void interleavedFullRotaryDim() {
        checkRope(new RopeParams(32, true, 10000, 1.0, false, 0, 0, 0), 32, DType.F32, 1e-5);
    }

    @Test
    void partialRotaryDimBothLayouts() {
        checkRope(RopeParams.standard(16, 10000), 64, DType.F32, 1e-5);
        checkRope(new RopeParams(24, true, 1e6, 1.0, false, 0, 0, 0), 64, DType.F32, 1e-5);
    }

    @Test
    void linearScalingDividesPositions() {
        RopeParams scaled = new RopeParams(32, false, 10000, 4.0, false, 0, 0, 0);
        checkRope(scaled, 48, DType.F32, 1e-5);
        // pos·(inv/4) is the position scaled down: pos 4 under scale 4 rotates as pos 1 unscaled
        RopeParams plain = RopeParams.standard(32, 10000);
        for (int i = 0; i < 16; i++) {
            assertThat(scaled.invFreq(i) * 4).isCloseTo(plain.invFreq(i), offset(1e-15));
        }
    }

    @Test
    void llama31Scaling() {
        RopeParams llama = new RopeParams(128, false, 500000, 8.0, true, 1.0, 4.0, 8192);
        int kept = 0;
        int divided = 0;
        int blended = 0;
        for (int i = 0; i < 64; i++) {
            double inv = Math.pow(500000, -2.0 * i / 128);
            double got = llama.invFreq(i);
            assertThat(got).isCloseTo(expectedInvFreq(llama, i), offset(1e-15 * inv));
            if (got == inv) {
                kept++;
            } else if (got == inv / 8) {
                divided++;
            } else {
                blended++;
                assertThat(got).isBetween(inv / 8, inv);
            }
        }
        // all three regimes occur for the Llama-3.1 settings
        assertThat(kept).isPositive();
        assertThat(divided).isPositive();
        assertThat(blended).isPositive();
        checkRope(llama, 128, DType.F32, 1e-5);
    }

    @Test
    void bf16RoundsOnceOnStore() {
        checkRope(RopeParams.standard(64, 10000), 64, DType.BF16, 1e-2);
        checkRope(new RopeParams(32, true, 10000, 2.0, false, 0, 0, 0), 64, DType.BF16, 1e-2);
    }

    @Test
    void rejectsOddOrOversizedRotaryDim() {
        CpuTensor q = DEVICE.zeros(DType.F32, 1, 1, 8);
        CpuTensor k = DEVICE.zeros(DType.F32, 1, 1, 8);
        CpuTensor pos = DEVICE.fromInts(new int[] {3}, 1);
        assertThatThrownBy(() -> DEVICE.ops().rope(q, k, pos, RopeParams.standard(7, 10000)))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> DEVICE.ops().rope(q, k, pos, RopeParams.standard(10, 10000)))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
