package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.device.cpu.OpsTestSupport.assertClose;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.Mamba2Shape;
import org.mstar.device.Tensor;

/**
 * The Mamba2 ops against a direct token-by-token computation in double: the causal conv1d continuing from stored
 * windows, the chunked scan (segments shorter and longer than a chunk, continuing from stored states), the decode
 * step, and the gated RMSNorm; splitting a segment over two calls changes nothing beyond rounding, and slots no
 * segment names are left as they were.
 */
class CpuStateSpaceTest {
    private static final CpuDevice DEVICE = new CpuDevice(3);
    /** Four heads in two groups, chunks of 4 tokens so that short segments cross chunk edges. */
    private static final Mamba2Shape SHAPE = new Mamba2Shape(4, 3, 2, 5, 4, 4, 0f, Float.POSITIVE_INFINITY);
    private static final int SLOTS = 6;

    @AfterAll
    static void close() {
        DEVICE.close();
    }

    /** A batch's inputs: xBC columns of proj, the convolution's weights, the per-head parameters and stored states. */
    private record Batch(Mamba2Shape s, int[] starts, int[] slots, float[] proj, float[] xbc, float[] convWeight,
                         float[] convBias, float[] convStates, float[] aLog, float[] dtBias, float[] d,
                         float[] ssmStates) {
        static Batch random(long seed, Mamba2Shape s, int[] lengths, int[] slots) {
            Random rnd = new Random(seed);
            int[] starts = new int[lengths.length + 1];
            for (int i = 0; i < lengths.length; i++) {
                starts[i + 1] = starts[i] + lengths[i];
            }
            int tokens = starts[lengths.length];
            return new Batch(s, starts, slots, randomFloats(rnd, tokens * s.projWidth(), 1),
                    randomFloats(rnd, tokens * s.convDim(), 1), randomFloats(rnd, s.convDim() * s.convKernel(), 0.5),
                    randomFloats(rnd, s.convDim(), 0.5), randomFloats(rnd, SLOTS * s.convDim() * (s.convKernel() - 1),
                    1), randomFloats(rnd, s.heads(), 0.5), randomFloats(rnd, s.heads(), 0.5),
                    randomFloats(rnd, s.heads(), 1), randomFloats(rnd, SLOTS * stateSize(s), 1));
        }

        int tokens() {
            return starts[starts.length - 1];
        }

        /** The conv's outputs, then the windows it leaves. */
        float[][] conv() {
            try (Tensor p = DEVICE.fromFloats(proj, DType.F32, tokens(), s.projWidth());
                 Tensor w = DEVICE.fromFloats(convWeight, DType.F32, s.convDim(), s.convKernel());
                 Tensor b = DEVICE.fromFloats(convBias, DType.F32, s.convDim());
                 Tensor st = DEVICE.fromFloats(convStates, DType.F32, SLOTS, s.convDim(), s.convKernel() - 1);
                 Tensor sl = DEVICE.fromInts(slots, slots.length);
                 Tensor sts = DEVICE.fromInts(starts, starts.length);
                 Tensor out = DEVICE.zeros(DType.F32, tokens(), s.convDim())) {
                DEVICE.ops().causalConv1d(p, w, b, st, sl, sts, s, out);
                return new float[][] {DEVICE.toFloats(out), DEVICE.toFloats(st)};
            }
        }

        /** The scan's (or with {@code step}, the decode step's) outputs, then the states it leaves. */
        float[][] scan(boolean step) {
            try (Tensor x = DEVICE.fromFloats(xbc, DType.F32, tokens(), s.convDim());
                 Tensor p = DEVICE.fromFloats(proj, DType.F32, tokens(), s.projWidth());
                 Tensor a = DEVICE.fromFloats(aLog, DType.F32, s.heads());
                 Tensor bias = DEVICE.fromFloats(dtBias, DType.F32, s.heads());
                 Tensor skip = DEVICE.fromFloats(d, DType.F32, s.heads());
                 Tensor st = DEVICE.fromFloats(ssmStates, DType.F32, SLOTS, s.heads(), s.headDim(), s.stateDim());
                 Tensor sl = DEVICE.fromInts(slots, slots.length);
                 Tensor sts = DEVICE.fromInts(starts, starts.length);
                 Tensor y = DEVICE.zeros(DType.F32, tokens(), s.inner())) {
                if (step) {
                    DEVICE.ops().ssmStep(x, p, a, bias, skip, st, sl, s, y);
                } else {
                    DEVICE.ops().ssdScan(x, p, a, bias, skip, st, sl, sts, s, y);
                }
                return new float[][] {DEVICE.toFloats(y), DEVICE.toFloats(st)};
            }
        }

        /** The direct conv: each channel's inputs, the window first, weighted over the last K. */
        double[][] naiveConv() {
            int conv = s.convDim();
            int k = s.convKernel();
            double[] out = new double[tokens() * conv];
            double[] windows = toDoubles(convStates);
            for (int i = 0; i < slots.length; i++) {
                for (int c = 0; c < conv; c++) {
                    int base = (slots[i] * conv + c) * (k - 1);
                    double[] in = new double[k - 1 + starts[i + 1] - starts[i]];
                    for (int j = 0; j < k - 1; j++) {
                        in[j] = convStates[base + j];
                    }
                    for (int t = starts[i]; t < starts[i + 1]; t++) {
                        in[k - 1 + t - starts[i]] = proj[t * s.projWidth() + s.xbcColumn() + c];
                    }
                    for (int t = starts[i]; t < starts[i + 1]; t++) {
                        double acc = convBias[c];
                        for (int j = 0; j < k; j++) {
                            acc += convWeight[c * k + j] * in[t - starts[i] + j];
                        }
                        out[t * conv + c] = acc / (1 + Math.exp(-acc));
                    }
                    System.arraycopy(in, in.length - (k - 1), windows, base, k - 1);
                }
            }
            return new double[][] {out, windows};
        }

        /** The recurrence itself, token by token: {@code h = exp(dt·A)·h + dt·x⊗B}, {@code y = h·C + D·x}. */
        double[][] naiveScan() {
            int dim = s.headDim();
            int n = s.stateDim();
            double[] y = new double[tokens() * s.inner()];
            double[] states = toDoubles(ssmStates);
            for (int i = 0; i < slots.length; i++) {
                for (int h = 0; h < s.heads(); h++) {
                    int base = (slots[i] * s.heads() + h) * dim * n;
                    int bCol = s.inner() + h / s.headsPerGroup() * n;
                    double a = -Math.exp(aLog[h]);
                    for (int t = starts[i]; t < starts[i + 1]; t++) {
                        double v = proj[t * s.projWidth() + s.dtColumn() + h] + dtBias[h];
                        double dt = Math.min(Math.max(Math.log1p(Math.exp(v)), s.dtMin()), s.dtMax());
                        for (int q = 0; q < dim; q++) {
                            double x = xbc[t * s.convDim() + h * dim + q];
                            double acc = 0;
                            for (int m = 0; m < n; m++) {
                                int e = base + q * n + m;
                                states[e] = Math.exp(dt * a) * states[e] + dt * x * xbc[t * s.convDim() + bCol + m];
                                acc += states[e] * xbc[t * s.convDim() + bCol + s.groupStates() + m];
                            }
                            y[t * s.inner() + h * dim + q] = acc + d[h] * x;
                        }
                    }
                }
            }
            return new double[][] {y, states};
        }
    }

    private static int stateSize(Mamba2Shape s) {
        return s.heads() * s.headDim() * s.stateDim();
    }

    private static double[] toDoubles(float[] v) {
        return OpsTestSupport.toDoubles(v);
    }

    @Test
    void convContinuesFromTheStoredWindows() {
        Batch b = Batch.random(1, SHAPE, new int[] {1, 6, 0, 2}, new int[] {3, 1, 5, 4});
        float[][] got = b.conv();
        double[][] want = b.naiveConv();
        assertClose(want[0], got[0], 1e-5);
        assertClose(want[1], got[1], 0);
    }

    @Test
    void scanMatchesTheRecurrenceWithinAndAcrossChunks() {
        Batch b = Batch.random(2, SHAPE, new int[] {3, 4, 11, 1}, new int[] {2, 5, 1, 3});
        float[][] got = b.scan(false);
        double[][] want = b.naiveScan();
        assertClose(want[0], got[0], 1e-4);
        assertClose(want[1], got[1], 1e-4);
    }

    @Test
    void scanClampsTheStepSize() {
        Mamba2Shape clamped = new Mamba2Shape(6, 2, 3, 4, 4, 3, 0.2f, 0.6f);
        Batch b = Batch.random(3, clamped, new int[] {9}, new int[] {1});
        assertClose(b.naiveScan()[0], b.scan(false)[0], 1e-4);
    }

    @Test
    void decodeStepMatchesTheRecurrenceAndTheScanOfOneToken() {
        Batch b = Batch.random(4, SHAPE, new int[] {1, 1, 1}, new int[] {4, 1, 2});
        float[][] step = b.scan(true);
        assertClose(b.naiveScan()[0], step[0], 1e-5);
        assertClose(b.naiveScan()[1], step[1], 1e-5);
        assertClose(toDoubles(b.scan(false)[0]), step[0], 1e-5);
    }

    @Test
    void aSegmentSplitOverTwoCallsEndsInTheSameState() {
        Batch whole = Batch.random(5, SHAPE, new int[] {13}, new int[] {2});
        int split = 7;
        int w = SHAPE.projWidth();
        int c = SHAPE.convDim();
        Batch head = new Batch(SHAPE, new int[] {0, split}, whole.slots, Arrays.copyOf(whole.proj, split * w),
                Arrays.copyOf(whole.xbc, split * c), whole.convWeight, whole.convBias, whole.convStates, whole.aLog,
                whole.dtBias, whole.d, whole.ssmStates);
        float[][] firstConv = head.conv();
        float[][] first = head.scan(false);
        Batch tail = new Batch(SHAPE, new int[] {0, 13 - split}, whole.slots,
                Arrays.copyOfRange(whole.proj, split * w, 13 * w), Arrays.copyOfRange(whole.xbc, split * c, 13 * c),
                whole.convWeight, whole.convBias, firstConv[1], whole.aLog, whole.dtBias, whole.d, first[1]);
        float[][] wholeConv = whole.conv();
        float[][] wholeScan = whole.scan(false);
        assertClose(toDoubles(wholeConv[1]), tail.conv()[1], 0);
        float[][] second = tail.scan(false);
        assertClose(toDoubles(Arrays.copyOfRange(wholeScan[0], split * SHAPE.inner(), 13 * SHAPE.inner())),
                second[0], 1e-5);
        assertClose(toDoubles(wholeScan[1]), second[1], 1e-5);
    }

    @Test
    void slotsNoSegmentNamesAreLeftAsTheyWere() {
        Batch b = Batch.random(6, SHAPE, new int[] {2, 5}, new int[] {4, 2});
        float[] states = b.scan(false)[1];
        float[] windows = b.conv()[1];
        int state = stateSize(SHAPE);
        int window = SHAPE.convDim() * (SHAPE.convKernel() - 1);
        for (int slot : new int[] {0, 1, 3, 5}) {
            assertThat(Arrays.copyOfRange(states, slot * state, (slot + 1) * state))
                    .containsExactly(Arrays.copyOfRange(b.ssmStates, slot * state, (slot + 1) * state));
            assertThat(Arrays.copyOfRange(windows, slot * window, (slot + 1) * window))
                    .containsExactly(Arrays.copyOfRange(b.convStates, slot * window, (slot + 1) * window));
        }
    }

    @Test
    void gatedNormNormalisesEachGroupOfTheGatedRow() {
        Random rnd = new Random(7);
        int rows = 3;
        int inner = 12;
        int gateWidth = 20;
        int groups = 3;
        float[] y = randomFloats(rnd, rows * inner, 1);
        float[] gate = randomFloats(rnd, rows * gateWidth, 1);
        float[] w = randomFloats(rnd, inner, 1);
        float eps = 1e-5f;
        double[] want = new double[rows * inner];
        int size = inner / groups;
        for (int r = 0; r < rows; r++) {
            for (int g = 0; g < groups; g++) {
                double ss = 0;
                double[] v = new double[size];
                for (int i = 0; i < size; i++) {
                    double z = gate[r * gateWidth + g * size + i];
                    v[i] = y[r * inner + g * size + i] * z / (1 + Math.exp(-z));
                    ss += v[i] * v[i];
                }
                for (int i = 0; i < size; i++) {
                    want[r * inner + g * size + i] = v[i] / Math.sqrt(ss / size + eps) * w[g * size + i];
                }
            }
        }
        try (Tensor ys = DEVICE.fromFloats(y, DType.F32, rows, inner);
             Tensor gs = DEVICE.fromFloats(gate, DType.F32, rows, gateWidth);
             Tensor ws = DEVICE.fromFloats(w, DType.F32, inner)) {
            DEVICE.ops().gatedRmsNorm(ys, gs, ws, groups, eps, ys);
            assertClose(want, DEVICE.toFloats(ys), 1e-5);
        }
    }

    @Test
    void aSlotOutsideThePoolIsRefused() {
        Batch b = Batch.random(8, SHAPE, new int[] {2}, new int[] {SLOTS});
        assertThatThrownBy(b::conv).isInstanceOf(IndexOutOfBoundsException.class).hasMessageContaining("slot 6");
    }
}
