package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.device.cpu.OpsTestSupport.assertClose;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.HalfFloats;

/** Embedding, rmsNorm, add, siluMul, splitQkv, gatherRows, argmax, kvAppend and the page copies. */
class CpuBasicOpsTest {
    private static final CpuDevice DEVICE = new CpuDevice(3);

    @AfterAll
    static void close() {
        DEVICE.close();
    }

    private static float[] rounded(float[] v, DType dtype) {
        return dtype == DType.BF16 ? CpuDevice.roundedToBf16(v) : v;
    }

    @Test
    void embeddingCopiesRowsAndRoundsOnlyWhenNarrowing() {
        Random rnd = new Random(1);
        int vocab = 40;
        int hidden = 24;
        float[] table = randomFloats(rnd, vocab * hidden, 1.0);
        int[] ids = {7, 0, 39, 7, 12};
        CpuTensor idT = DEVICE.fromInts(ids, ids.length);
        for (DType tableType : new DType[] {DType.F32, DType.BF16}) {
            float[] stored = rounded(table, tableType);
            CpuTensor t = DEVICE.fromFloats(table, tableType, vocab, hidden);
            for (DType outType : new DType[] {DType.F32, DType.BF16}) {
                CpuTensor out = DEVICE.allocate(outType, ids.length, hidden);
                DEVICE.ops().embedding(t, idT, out);
                float[] got = DEVICE.toFloats(out);
                for (int i = 0; i < ids.length; i++) {
                    for (int h = 0; h < hidden; h++) {
                        float want = stored[ids[i] * hidden + h];
                        assertThat(got[i * hidden + h]).isEqualTo(outType == DType.BF16 ? HalfFloats.roundBf16(want) : want);
                    }
                }
            }
        }
        CpuTensor t = DEVICE.fromFloats(table, DType.F32, vocab, hidden);
        assertThatThrownBy(() -> DEVICE.ops().embedding(t, DEVICE.fromInts(new int[] {vocab}, 1),
                DEVICE.allocate(DType.F32, 1, hidden))).isInstanceOf(IndexOutOfBoundsException.class);
    }

    private static double[] expectedNorm(float[] x, float[] w, float eps, int rows, int hidden) {
        double[] out = new double[x.length];
        for (int r = 0; r < rows; r++) {
            double ss = 0;
            for (int h = 0; h < hidden; h++) {
                ss += (double) x[r * hidden + h] * x[r * hidden + h];
            }
            double inv = 1 / Math.sqrt(ss / hidden + eps);
            for (int h = 0; h < hidden; h++) {
                out[r * hidden + h] = x[r * hidden + h] * inv * w[h];
            }
        }
        return out;
    }

    @Test
    void rmsNormWithoutResidual() {
        Random rnd = new Random(2);
        int rows = 70;
        int hidden = 512;
        float[] x = randomFloats(rnd, rows * hidden, 2.0);
        float[] w = randomFloats(rnd, hidden, 1.0);
        CpuTensor out = DEVICE.allocate(DType.F32, rows, hidden);
        DEVICE.ops().rmsNorm(DEVICE.fromFloats(x, DType.F32, rows, hidden), null,
                DEVICE.fromFloats(w, DType.F32, hidden), 1e-6f, out);
        assertClose(expectedNorm(x, w, 1e-6f, rows, hidden), DEVICE.toFloats(out), 1e-5);

        float[] xb = CpuDevice.roundedToBf16(x);
        float[] wb = CpuDevice.roundedToBf16(w);
        CpuTensor outB = DEVICE.allocate(DType.BF16, rows, hidden);
        DEVICE.ops().rmsNorm(DEVICE.fromFloats(xb, DType.BF16, rows, hidden), null,
                DEVICE.fromFloats(wb, DType.BF16, hidden), 1e-5f, outB);
        assertClose(expectedNorm(xb, wb, 1e-5f, rows, hidden), DEVICE.toFloats(outB), 1e-2);
    }

    @Test
    void rmsNormFusesTheResidualAddAndNormalisesTheStoredSum() {
        Random rnd = new Random(3);
        int rows = 9;
        int hidden = 96;
        float[] x = randomFloats(rnd, rows * hidden, 1.0);
        float[] res = randomFloats(rnd, rows * hidden, 1.0);
        float[] w = randomFloats(rnd, hidden, 1.0);

        CpuTensor resT = DEVICE.fromFloats(res, DType.F32, rows, hidden);
        CpuTensor out = DEVICE.allocate(DType.F32, rows, hidden);
        DEVICE.ops().rmsNorm(DEVICE.fromFloats(x, DType.F32, rows, hidden), resT, DEVICE.fromFloats(w, DType.F32, hidden),
                1e-6f, out);
        float[] sum = new float[x.length];
        for (int i = 0; i < x.length; i++) {
            sum[i] = res[i] + x[i];
        }
        assertThat(DEVICE.toFloats(resT)).isEqualTo(sum);
        assertClose(expectedNorm(sum, w, 1e-6f, rows, hidden), DEVICE.toFloats(out), 1e-5);

        // bf16 residual stream: the sum is rounded to bf16 once and that stored value is normalised
        float[] xb = CpuDevice.roundedToBf16(x);
        float[] rb = CpuDevice.roundedToBf16(res);
        CpuTensor resB = DEVICE.fromFloats(rb, DType.BF16, rows, hidden);
        CpuTensor outB = DEVICE.allocate(DType.BF16, rows, hidden);
        DEVICE.ops().rmsNorm(DEVICE.fromFloats(xb, DType.BF16, rows, hidden), resB,
                DEVICE.fromFloats(w, DType.F32, hidden), 1e-6f, outB);
        float[] sumB = new float[x.length];
        for (int i = 0; i < x.length; i++) {
            sumB[i] = HalfFloats.roundBf16(rb[i] + xb[i]);
        }
        assertThat(DEVICE.toFloats(resB)).isEqualTo(sumB);
        assertClose(expectedNorm(sumB, w, 1e-6f, rows, hidden), DEVICE.toFloats(outB), 1e-2);
    }

    @Test
    void addRoundsOnceToTheOutputType() {
        Random rnd = new Random(4);
        int n = 9000;
        float[] a = randomFloats(rnd, n, 1.0);
        float[] b = CpuDevice.roundedToBf16(randomFloats(rnd, n, 1.0));
        CpuTensor out = DEVICE.allocate(DType.F32, n);
        CpuTensor outB = DEVICE.allocate(DType.BF16, n);
        CpuTensor at = DEVICE.fromFloats(a, DType.F32, n);
        CpuTensor bt = DEVICE.fromFloats(b, DType.BF16, n);
        DEVICE.ops().add(at, bt, out);
        DEVICE.ops().add(at, bt, outB);
        float[] got = DEVICE.toFloats(out);
        float[] gotB = DEVICE.toFloats(outB);
        for (int i = 0; i < n; i++) {
            assertThat(got[i]).isEqualTo(a[i] + b[i]);
            assertThat(gotB[i]).isEqualTo(HalfFloats.roundBf16(a[i] + b[i]));
        }
    }

    @Test
    void siluMulGatesTheUpProjection() {
        Random rnd = new Random(5);
        int rows = 11;
        int inter = 300;
        float[] gu = randomFloats(rnd, rows * 2 * inter, 3.0);
        double[] want = new double[rows * inter];
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < inter; i++) {
                double g = gu[r * 2 * inter + i];
                want[r * inter + i] = g / (1 + Math.exp(-g)) * gu[r * 2 * inter + inter + i];
            }
        }
        CpuTensor out = DEVICE.allocate(DType.F32, rows, inter);
        DEVICE.ops().siluMul(DEVICE.fromFloats(gu, DType.F32, rows, 2 * inter), out);
        assertClose(want, DEVICE.toFloats(out), 1e-5);

        float[] gub = CpuDevice.roundedToBf16(gu);
        double[] wantB = new double[rows * inter];
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < inter; i++) {
                double g = gub[r * 2 * inter + i];
                wantB[r * inter + i] = g / (1 + Math.exp(-g)) * gub[r * 2 * inter + inter + i];
            }
        }
        CpuTensor outB = DEVICE.allocate(DType.BF16, rows, inter);
        DEVICE.ops().siluMul(DEVICE.fromFloats(gub, DType.BF16, rows, 2 * inter), outB);
        assertClose(wantB, DEVICE.toFloats(outB), 1e-2);
    }

    @Test
    void splitQkvCopiesEachColumnRangeIntoItsOwnTensor() {
        Random rnd = new Random(8);
        int n = 7;
        int qw = 24;
        int kw = 8;
        int vw = 8;
        int width = qw + kw + vw;
        float[] x = randomFloats(rnd, n * width, 2.0);
        for (DType dt : new DType[] {DType.F32, DType.BF16}) {
            float[] stored = rounded(x, dt);
            CpuTensor q = DEVICE.allocate(dt, n, qw / 8, 8);
            CpuTensor k = DEVICE.allocate(dt, n, kw);
            CpuTensor v = DEVICE.allocate(dt, n, vw);
            DEVICE.ops().splitQkv(DEVICE.fromFloats(x, dt, n, width), q, k, v);
            float[] gq = DEVICE.toFloats(q);
            float[] gk = DEVICE.toFloats(k);
            float[] gv = DEVICE.toFloats(v);
            for (int r = 0; r < n; r++) {
                for (int c = 0; c < width; c++) {
                    float got = c < qw ? gq[r * qw + c] : c < qw + kw ? gk[r * kw + c - qw] : gv[r * vw + c - qw - kw];
                    assertThat(got).isEqualTo(stored[r * width + c]);
                }
            }
        }
        assertThatThrownBy(() -> DEVICE.ops().splitQkv(DEVICE.allocate(DType.F32, n, width), DEVICE.allocate(DType.F32, n, qw),
                DEVICE.allocate(DType.F32, n, kw), DEVICE.allocate(DType.F32, n, vw + 1)))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void gatherRowsPicksRowsInOrder() {
        Random rnd = new Random(6);
        float[] x = randomFloats(rnd, 8 * 5, 1.0);
        CpuTensor xt = DEVICE.fromFloats(x, DType.BF16, 8, 5);
        int[] rows = {7, 2, 2, 0};
        CpuTensor out = DEVICE.allocate(DType.BF16, rows.length, 5);
        DEVICE.ops().gatherRows(xt, DEVICE.fromInts(rows, rows.length), out);
        float[] got = DEVICE.toFloats(out);
        float[] stored = CpuDevice.roundedToBf16(x);
        for (int j = 0; j < rows.length; j++) {
            for (int e = 0; e < 5; e++) {
                assertThat(got[j * 5 + e]).isEqualTo(stored[rows[j] * 5 + e]);
            }
        }
        assertThatThrownBy(() -> DEVICE.ops().gatherRows(xt, DEVICE.fromInts(new int[] {8}, 1), DEVICE.allocate(DType.BF16, 1, 5)))
                .isInstanceOf(IndexOutOfBoundsException.class);
    }

    @Test
    void argmaxTakesTheLowestIndexOnTies() {
        float[] logits = {
            1f, 3f, 3f, -1f,
            -5f, -4f, -4f, -6f,
            2f, 2f, 2f, 2f,
            0f, 0f, 0f, 9f,
        };
        CpuTensor out = DEVICE.allocate(DType.I32, 4);
        DEVICE.ops().argmax(DEVICE.fromFloats(logits, DType.BF16, 4, 4), out);
        assertThat(DEVICE.toInts(out)).containsExactly(1, 1, 0, 3);

        Random rnd = new Random(7);
        int vocab = 1000;
        float[] big = randomFloats(rnd, 3 * vocab, 1.0);
        DEVICE.ops().argmax(DEVICE.fromFloats(big, DType.F32, 3, vocab), out.rows(0, 3));
        for (int r = 0; r < 3; r++) {
            int best = 0;
            for (int i = 0; i < vocab; i++) {
                if (big[r * vocab + i] > big[r * vocab + best]) {
                    best = i;
                }
            }
            assertThat(DEVICE.toInts(out)[r]).isEqualTo(best);
        }
    }

    private static final int LAYERS = 3;
    private static final int PAGES = 6;
    private static final int PAGE_SIZE = 4;
    private static final int KV_HEADS = 2;
    private static final int HEAD_DIM = 8;
    private static final int TOKEN = KV_HEADS * HEAD_DIM;
    private static final int PAGE = 2 * PAGE_SIZE * TOKEN;

    private static int slot(int layer, int page, int kv, int offset) {
        return (layer * PAGES + page) * PAGE + (kv * PAGE_SIZE + offset) * TOKEN;
    }

    @Test
    void kvAppendWritesOnlyTheAddressedSlots() {
        Random rnd = new Random(8);
        for (DType poolType : new DType[] {DType.F32, DType.BF16}) {
            float[] before = rounded(randomFloats(rnd, LAYERS * PAGES * PAGE, 1.0), poolType);
            CpuTensor pool = DEVICE.fromFloats(before, poolType, LAYERS, PAGES, 2, PAGE_SIZE, KV_HEADS, HEAD_DIM);
            int[] pages = {5, 0, 5, 3};
            int[] offsets = {3, 0, 1, 2};
            float[] k = randomFloats(rnd, pages.length * TOKEN, 1.0);
            float[] v = randomFloats(rnd, pages.length * TOKEN, 1.0);
            int layer = 2;
            DEVICE.ops().kvAppend(pool, layer, DEVICE.fromFloats(k, DType.F32, pages.length, KV_HEADS, HEAD_DIM),
                    DEVICE.fromFloats(v, DType.F32, pages.length, KV_HEADS, HEAD_DIM),
                    DEVICE.fromInts(pages, pages.length), DEVICE.fromInts(offsets, offsets.length));
            float[] want = before.clone();
            float[] kStored = rounded(k, poolType);
            float[] vStored = rounded(v, poolType);
            for (int i = 0; i < pages.length; i++) {
                System.arraycopy(kStored, i * TOKEN, want, slot(layer, pages[i], 0, offsets[i]), TOKEN);
                System.arraycopy(vStored, i * TOKEN, want, slot(layer, pages[i], 1, offsets[i]), TOKEN);
            }
            assertThat(DEVICE.toFloats(pool)).isEqualTo(want);
            assertThatThrownBy(() -> DEVICE.ops().kvAppend(pool, 0, DEVICE.zeros(DType.F32, 1, KV_HEADS, HEAD_DIM),
                    DEVICE.zeros(DType.F32, 1, KV_HEADS, HEAD_DIM), DEVICE.fromInts(new int[] {0}, 1),
                    DEVICE.fromInts(new int[] {PAGE_SIZE}, 1))).isInstanceOf(IndexOutOfBoundsException.class);
        }
    }

    @Test
    void pageCopiesMoveWholePagesInEveryLayer() {
        Random rnd = new Random(9);
        float[] init = CpuDevice.roundedToBf16(randomFloats(rnd, LAYERS * PAGES * PAGE, 1.0));
        CpuTensor pool = DEVICE.fromFloats(init, DType.BF16, LAYERS, PAGES, 2, PAGE_SIZE, KV_HEADS, HEAD_DIM);

        int[] src = {4, 1};
        int[] dst = {0, 5};
        DEVICE.ops().copyPages(pool, DEVICE.fromInts(src, 2), DEVICE.fromInts(dst, 2));
        float[] want = init.clone();
        for (int l = 0; l < LAYERS; l++) {
            for (int i = 0; i < src.length; i++) {
                System.arraycopy(init, slot(l, src[i], 0, 0), want, slot(l, dst[i], 0, 0), PAGE);
            }
        }
        assertThat(DEVICE.toFloats(pool)).isEqualTo(want);

        int[] pages = {5, 2, 3};
        CpuTensor staged = DEVICE.allocate(DType.BF16, LAYERS, pages.length, 2, PAGE_SIZE, KV_HEADS, HEAD_DIM);
        DEVICE.ops().gatherPages(pool, DEVICE.fromInts(pages, pages.length), staged);
        float[] got = DEVICE.toFloats(staged);
        for (int l = 0; l < LAYERS; l++) {
            for (int i = 0; i < pages.length; i++) {
                for (int e = 0; e < PAGE; e++) {
                    assertThat(got[(l * pages.length + i) * PAGE + e]).isEqualTo(want[slot(l, pages[i], 0, 0) + e]);
                }
            }
        }

        // scatter the staged pages back somewhere else: the pool then holds them there, bit for bit
        int[] back = {1, 0, 4};
        DEVICE.ops().scatterPages(pool, DEVICE.fromInts(back, back.length), staged);
        float[] after = DEVICE.toFloats(pool);
        float[] wantAfter = want.clone();
        for (int l = 0; l < LAYERS; l++) {
            for (int i = 0; i < back.length; i++) {
                System.arraycopy(want, slot(l, pages[i], 0, 0), wantAfter, slot(l, back[i], 0, 0), PAGE);
            }
        }
        assertThat(after).isEqualTo(wantAfter);
    }
}
