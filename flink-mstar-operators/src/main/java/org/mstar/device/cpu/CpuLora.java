package org.mstar.device.cpu;

import org.mstar.device.DType;

/**
 * {@link org.mstar.device.ProjectionOps#addLora} on the host: per row, the shrink {@code t = x · A_sᵀ} into an fp32
 * vector of the stack's rank, then the expand {@code out += scale_s · t · B_sᵀ} over the target columns. Sums run in
 * index order from zero, so a row's update does not depend on the other rows of the call.
 */
final class CpuLora {
    private CpuLora() {}

    static void run(ParallelLoop loop, CpuTensor x, CpuTensor a, CpuTensor b, CpuTensor scales, CpuTensor slots,
                    CpuTensor out, int outCol) {
        if (a.rank() != 3 || b.rank() != 3 || a.dim(0) != b.dim(0) || a.dim(1) != b.dim(2)) {
            throw new IllegalArgumentException("addLora takes a [S, R, K] and b [S, N, R], got " + a + " and " + b);
        }
        int stack = (int) a.dim(0);
        int rank = (int) a.dim(1);
        int k = (int) a.dim(2);
        int n = (int) b.dim(1);
        int rows = slots.size();
        int width = (int) out.dim(-1);
        if (slots.dtype() != DType.I32 || scales.dtype() != DType.F32 || scales.size() != stack) {
            throw new IllegalArgumentException("addLora takes I32 slots and F32 scales [" + stack + "], got " + slots
                    + " and " + scales);
        }
        if (x.dim(-1) != k || x.size() != (long) rows * k || out.size() != (long) rows * width || outCol < 0
                || outCol + n > width) {
            throw new IllegalArgumentException("addLora of x " + x + " into columns [" + outCol + ", " + (outCol + n)
                    + ") of " + out + " for " + rows + " rows of slots");
        }
        for (int row = 0; row < rows; row++) {
            if (slots.getInt(row) >= stack) {
                throw new IndexOutOfBoundsException("adapter slot " + slots.getInt(row) + " of row " + row
                        + " outside the stack of " + stack);
            }
        }
        loop.forChunks(rows, (long) rank * (k + n), (from, to) -> {
            float[] xs = new float[k];
            float[] ws = new float[Math.max(k, rank)];
            float[] t = new float[rank];
            float[] o = new float[n];
            for (int row = from; row < to; row++) {
                int s = slots.getInt(row);
                if (s < 0) {
                    continue;
                }
                FloatRows.read(x, row * k, xs, 0, k);
                for (int r = 0; r < rank; r++) {
                    FloatRows.read(a, (s * rank + r) * k, ws, 0, k);
                    float acc = 0f;
                    for (int c = 0; c < k; c++) {
                        acc += xs[c] * ws[c];
                    }
                    t[r] = acc;
                }
                float scale = scales.getFloat(s);
                FloatRows.read(out, row * width + outCol, o, 0, n);
                for (int j = 0; j < n; j++) {
                    FloatRows.read(b, (s * n + j) * rank, ws, 0, rank);
                    float acc = 0f;
                    for (int r = 0; r < rank; r++) {
                        acc += t[r] * ws[r];
                    }
                    o[j] += scale * acc;
                }
                FloatRows.write(o, 0, out, row * width + outCol, n);
            }
        });
    }
}
