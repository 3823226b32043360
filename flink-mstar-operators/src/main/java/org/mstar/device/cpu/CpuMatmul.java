package org.mstar.device.cpu;

import java.util.Arrays;
import org.mstar.device.DType;
import org.mstar.device.Float8E4m3;
import org.mstar.device.Fp8Weight;

/**
 * {@code out[m, N] = x[m, K] · wᵀ + bias} with {@code w [N, K]} in F32, BF16 or F16, or an {@link Fp8Weight}.
 * An FP8 weight is dequantised as it is read (code × scale, rounded once to fp32), so the sums are those of a
 * weight dequantised at load.
 *
 * <p>Every output is the same fp32 sum on both paths: products added one at a time in order of
 * {@code k}, starting from zero, then the bias, rounded once on store. A row's result therefore does
 * not depend on how many rows share the call or on the thread count.
 *
 * <ul>
 *   <li>Few rows (decode): four weight rows at a time, dotted with each activation row; four independent
 *       accumulators hide the add latency and share each activation load.</li>
 *   <li>Many rows (prefill): weights transposed into small {@code [depth][columns]} panels, so the
 *       innermost loop is an axpy over columns that the JIT vectorises, four activation rows per panel
 *       load; each weight is widened once.</li>
 * </ul>
 * Both parallelise over output columns.
 */
final class CpuMatmul {
    /** From this many rows on, the cost of transposing the weights pays for itself. */
    private static final int PANEL_MIN_ROWS = 8;
    /** Output columns per panel: long enough vector loops, yet enough blocks to share among threads. */
    private static final int PANEL_COLS = 128;
    /** Reduction depth per panel: a 256 × 128 fp32 panel is 128 KiB and stays in L2 while the rows stream by. */
    private static final int PANEL_DEPTH = 256;
    /** Weight rows per dot-product group. */
    private static final int GROUP = 4;

    private final float[] x;
    private final int xOff;
    private final CpuTensor w;
    private final WeightReader weightRows;
    private final float[] bias;
    private final CpuTensor out;
    private final int m;
    private final int n;
    private final int k;

    private CpuMatmul(CpuTensor x, CpuTensor w, WeightReader weightRows, long[] wShape, CpuTensor bias,
                      CpuTensor out) {
        if (wShape.length != 2) {
            throw new IllegalArgumentException("matmul weight must be [N, K], got " + Arrays.toString(wShape));
        }
        this.w = w;
        this.weightRows = weightRows;
        this.out = out;
        this.n = (int) wShape[0];
        this.k = (int) wShape[1];
        if (k == 0 || x.size() % k != 0 || x.dim(-1) != k) {
            throw new IllegalArgumentException("matmul of " + x + " with weight " + w);
        }
        this.m = x.size() / k;
        if (out.size() != (long) m * n || out.dim(-1) != n) {
            throw new IllegalArgumentException("matmul output " + out + " for " + m + " rows of " + n);
        }
        if (bias != null && bias.size() != n) {
            throw new IllegalArgumentException("matmul bias " + bias + " for " + n + " outputs");
        }
        if (x.dtype() == DType.F32) {
            this.x = x.f32();
            this.xOff = x.offset();
        } else {
            this.x = FloatRows.readAll(x);
            this.xOff = 0;
        }
        this.bias = bias == null ? new float[n] : FloatRows.readAll(bias);
    }

    static void run(ParallelLoop loop, CpuTensor x, CpuTensor w, CpuTensor bias, CpuTensor out) {
        run(loop, new CpuMatmul(x, w, (from, dst, dstOff, len) -> FloatRows.read(w, from, dst, dstOff, len), w.shape(),
                bias, out));
    }

    static void run(ParallelLoop loop, CpuTensor x, Fp8Weight w, CpuTensor bias, CpuTensor out) {
        run(loop, new CpuMatmul(x, null, fp8Reader(w), w.shape(), bias, out));
    }

    /** Reads runs of an FP8 weight's elements as code × scale, rounded once to fp32. */
    private static WeightReader fp8Reader(Fp8Weight w) {
        CpuTensor codes = CpuTensor.of(w.codes());
        CpuTensor scales = CpuTensor.of(w.scales());
        int k = (int) w.dim(1);
        int blockRows = w.blockRows();
        int blockCols = w.blockCols();
        int scaleCols = (int) scales.dim(1);
        byte[] c = codes.u8();
        float[] s = scales.f32();
        return (from, dst, dstOff, len) -> {
            for (int e = 0; e < len; e++) {
                int row = (from + e) / k;
                int col = (from + e) % k;
                float scale = s[scales.offset() + row / blockRows * scaleCols + col / blockCols];
                dst[dstOff + e] = Float8E4m3.decode(c[codes.offset() + from + e]) * scale;
            }
        };
    }

    private static void run(ParallelLoop loop, CpuMatmul mm) {
        if (mm.m == 0 || mm.n == 0) {
            return;
        }
        if (mm.m >= PANEL_MIN_ROWS) {
            int blocks = (mm.n + PANEL_COLS - 1) / PANEL_COLS;
            loop.forChunks(blocks, (long) mm.m * mm.k * PANEL_COLS, mm::panelBlocks);
        } else {
            int groups = (mm.n + GROUP - 1) / GROUP;
            loop.forChunks(groups, (long) mm.m * mm.k * GROUP, mm::dotGroups);
        }
    }

    /** Columns {@code [from·GROUP, to·GROUP)} by dot products against (widened) weight rows. */
    private void dotGroups(int from, int to) {
        boolean direct = w != null && w.dtype() == DType.F32;
        float[] widened = direct ? null : new float[GROUP * k];
        float[] result = new float[m * GROUP];
        for (int g = from; g < to; g++) {
            int c0 = g * GROUP;
            int cols = Math.min(GROUP, n - c0);
            float[] wa;
            int wb;
            if (direct) {
                wa = w.f32();
                wb = w.offset() + c0 * k;
            } else {
                weightRows.read(c0 * k, widened, 0, cols * k);
                wa = widened;
                wb = 0;
            }
            if (cols == GROUP) {
                dot4(wa, wb, result);
            } else {
                for (int c = 0; c < cols; c++) {
                    dot1(wa, wb + c * k, c, cols, result);
                }
            }
            for (int r = 0; r < m; r++) {
                for (int c = 0; c < cols; c++) {
                    result[r * cols + c] += bias[c0 + c];
                }
                FloatRows.write(result, r * cols, out, r * n + c0, cols);
            }
        }
    }

    private void dot4(float[] wa, int wb, float[] result) {
        int w0 = wb;
        int w1 = wb + k;
        int w2 = wb + 2 * k;
        int w3 = wb + 3 * k;
        for (int r = 0; r < m; r++) {
            int xb = xOff + r * k;
            float a0 = 0f;
            float a1 = 0f;
            float a2 = 0f;
            float a3 = 0f;
            for (int i = 0; i < k; i++) {
                float xi = x[xb + i];
                a0 += xi * wa[w0 + i];
                a1 += xi * wa[w1 + i];
                a2 += xi * wa[w2 + i];
                a3 += xi * wa[w3 + i];
            }
            result[r * GROUP] = a0;
            result[r * GROUP + 1] = a1;
            result[r * GROUP + 2] = a2;
            result[r * GROUP + 3] = a3;
        }
    }

    private void dot1(float[] wa, int wb, int c, int cols, float[] result) {
        for (int r = 0; r < m; r++) {
            int xb = xOff + r * k;
            float a = 0f;
            for (int i = 0; i < k; i++) {
                a += x[xb + i] * wa[wb + i];
            }
            result[r * cols + c] = a;
        }
    }

    /** Column blocks {@code [from, to)} of {@link #PANEL_COLS} through transposed weight panels. */
    private void panelBlocks(int from, int to) {
        float[][] acc = new float[m][PANEL_COLS];
        float[][] panel = new float[PANEL_DEPTH][PANEL_COLS];
        float[] weightRow = new float[PANEL_DEPTH];
        for (int block = from; block < to; block++) {
            int c0 = block * PANEL_COLS;
            int cols = Math.min(PANEL_COLS, n - c0);
            for (float[] row : acc) {
                Arrays.fill(row, 0f);
            }
            for (int k0 = 0; k0 < k; k0 += PANEL_DEPTH) {
                int depth = Math.min(PANEL_DEPTH, k - k0);
                for (int c = 0; c < cols; c++) {
                    weightRows.read((c0 + c) * k + k0, weightRow, 0, depth);
                    for (int i = 0; i < depth; i++) {
                        panel[i][c] = weightRow[i];
                    }
                }
                int r = 0;
                for (; r + 4 <= m; r += 4) {
                    int xb = xOff + r * k + k0;
                    for (int i = 0; i < depth; i++) {
                        axpy4(acc[r], acc[r + 1], acc[r + 2], acc[r + 3], panel[i],
                                x[xb + i], x[xb + k + i], x[xb + 2 * k + i], x[xb + 3 * k + i], cols);
                    }
                }
                for (; r < m; r++) {
                    int xb = xOff + r * k + k0;
                    for (int i = 0; i < depth; i++) {
                        axpy(acc[r], panel[i], x[xb + i], cols);
                    }
                }
            }
            for (int r = 0; r < m; r++) {
                for (int c = 0; c < cols; c++) {
                    acc[r][c] += bias[c0 + c];
                }
                FloatRows.write(acc[r], 0, out, r * n + c0, cols);
            }
        }
    }

    // The JIT vectorises these only because every array is indexed by the bare loop variable: with
    // differing offsets into possibly-aliased arrays it falls back to scalar code.

    /** {@code a0..a3[c] += x0..x3 · w[c]}: four rows share each panel load. */
    private static void axpy4(float[] a0, float[] a1, float[] a2, float[] a3, float[] w,
                              float x0, float x1, float x2, float x3, int len) {
        for (int c = 0; c < len; c++) {
            float v = w[c];
            a0[c] += x0 * v;
            a1[c] += x1 * v;
            a2[c] += x2 * v;
            a3[c] += x3 * v;
        }
    }

    private static void axpy(float[] a, float[] w, float x, int len) {
        for (int c = 0; c < len; c++) {
            a[c] += x * w[c];
        }
    }

    /** Reads {@code len} weight elements from row-major index {@code from}, widened to fp32. */
    @FunctionalInterface
    private interface WeightReader {
        void read(int from, float[] dst, int dstOff, int len);
    }
}
