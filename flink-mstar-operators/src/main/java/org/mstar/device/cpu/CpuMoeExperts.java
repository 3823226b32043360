package org.mstar.device.cpu;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.HalfFloats;
import org.mstar.device.MoeExpertsShape;

/**
 * {@link org.mstar.device.MoeOps#moeExperts} on the host, grouped by expert as the GPU runs it: each expert's rows
 * go through its gate/up rows and SiLU·mul (rounded to out's dtype), then its down rows (fp32); each row's outputs
 * are then weighed and summed in the order of its choices and rounded once; a choice of id -1 (an expert on
 * another device) is left out. Every sum runs in index order from zero,
 * so a row's result does not depend on the other rows of the call.
 */
final class CpuMoeExperts {
    private CpuMoeExperts() {}

    static void run(ParallelLoop loop, CpuTensor x, CpuTensor gateUp, CpuTensor down, CpuTensor ids,
                    CpuTensor weights, CpuTensor out) {
        MoeExpertsShape shape = MoeExpertsShape.of(x, gateUp, down, ids, weights, out);
        int experts = shape.experts();
        int inter = shape.inter();
        int hidden = shape.hidden();
        int k = shape.topK();
        int rows = shape.rows();
        List<List<Integer>> byExpert = new ArrayList<>();
        for (int e = 0; e < experts; e++) {
            byExpert.add(new ArrayList<>());
        }
        for (int a = 0; a < rows * k; a++) {
            int e = ids.getInt(a);
            if (e == -1) {
                // an expert of another device (expert parallelism): no share of this row here
                continue;
            }
            if (e < 0 || e >= experts) {
                throw new IndexOutOfBoundsException("expert " + e + " of row " + a / k + " outside the " + experts);
            }
            byExpert.get(e).add(a);
        }
        // y[a]: the down projection of assignment a (row a / k, choice a % k), before its weight
        float[][] y = new float[rows * k][];
        DType act = out.dtype();
        loop.forEach(experts, (long) rows * k / experts * 3 * inter * hidden + 1, e -> {
            List<Integer> assigned = byExpert.get(e);
            int m = assigned.size();
            // each weight row is read once for all of the expert's rows
            float[][] xs = new float[m][hidden];
            float[][] h = new float[m][inter];
            for (int r = 0; r < m; r++) {
                FloatRows.read(x, assigned.get(r) / k * hidden, xs[r], 0, hidden);
                y[assigned.get(r)] = new float[hidden];
            }
            float[] gate = new float[hidden];
            float[] up = new float[hidden];
            for (int c = 0; c < inter && m > 0; c++) {
                FloatRows.read(gateUp, (e * 2 * inter + c) * hidden, gate, 0, hidden);
                FloatRows.read(gateUp, (e * 2 * inter + inter + c) * hidden, up, 0, hidden);
                for (int r = 0; r < m; r++) {
                    float g = round(act, dot(xs[r], gate, hidden));
                    float u = round(act, dot(xs[r], up, hidden));
                    h[r][c] = round(act, (float) (g / (1.0 + Math.exp(-g))) * u);
                }
            }
            float[] dw = new float[inter];
            for (int o = 0; o < hidden && m > 0; o++) {
                FloatRows.read(down, (e * hidden + o) * inter, dw, 0, inter);
                for (int r = 0; r < m; r++) {
                    y[assigned.get(r)][o] = dot(h[r], dw, inter);
                }
            }
        });
        loop.forChunks(rows, (long) k * hidden, (from, to) -> {
            float[] sum = new float[hidden];
            for (int row = from; row < to; row++) {
                Arrays.fill(sum, 0f);
                for (int j = 0; j < k; j++) {
                    float[] ya = y[row * k + j];
                    if (ya == null) {
                        continue;
                    }
                    float w = weights.getFloat(row * k + j);
                    for (int o = 0; o < hidden; o++) {
                        sum[o] += w * ya[o];
                    }
                }
                FloatRows.write(sum, 0, out, row * hidden, hidden);
            }
        });
    }

    private static float dot(float[] a, float[] b, int n) {
        float acc = 0f;
        for (int i = 0; i < n; i++) {
            acc += a[i] * b[i];
        }
        return acc;
    }

    /** What storing {@code v} as {@code dtype} and reading it back gives. */
    private static float round(DType dtype, float v) {
        return switch (dtype) {
            case BF16 -> HalfFloats.roundBf16(v);
            case F16 -> HalfFloats.roundF16(v);
            default -> v;
        };
    }
}
