package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.device.cpu.OpsTestSupport.assertClose;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.RopeParams;
import org.mstar.device.Tensor;

/**
 * The latent attention ops on the CPU against the definitions they implement: a latent row's layout as latentAppend
 * writes it, and the absorbed chain (latentQuery, latentAttention over paged rows, latentValues) equal to attention
 * with each head's keys and values decompressed from the latent, for a prefill chunk over a cached prefix (causal)
 * beside a decode row.
 */
class CpuLatentAttentionTest {
    private static final CpuDevice CPU = new CpuDevice(2);
    private static final int HEADS = 3;
    private static final int RANK = 8;
    private static final int ROPE = 4;
    private static final int NOPE = 6;
    private static final int VALUE = 5;
    private static final int WIDTH = RANK + ROPE;
    private static final int PAGE = 4;
    private static final int PAGES = 6;
    private static final int LAYER = 1;
    private static final RopeParams ROPE_PARAMS = new RopeParams(ROPE, true, 10_000, 1, false, 0, 0, 0);

    @AfterAll
    static void close() {
        CPU.close();
    }

    private static int slot(int page, int offset) {
        return ((LAYER * PAGES + page) * PAGE + offset) * WIDTH;
    }

    /** {@code x} rotated at {@code pos} in neighbouring pairs, in double. */
    private static double[] rotated(float[] x, int from, int pos) {
        double[] out = new double[ROPE];
        for (int i = 0; i < ROPE / 2; i++) {
            double angle = pos * ROPE_PARAMS.invFreq(i);
            double a = x[from + 2 * i];
            double b = x[from + 2 * i + 1];
            out[2 * i] = a * Math.cos(angle) - b * Math.sin(angle);
            out[2 * i + 1] = b * Math.cos(angle) + a * Math.sin(angle);
        }
        return out;
    }

    @Test
    void appendWritesTheNormalisedLatentThenTheRotatedRopePart() {
        Random rnd = new Random(1);
        int n = 3;
        float[] kvA = randomFloats(rnd, n * WIDTH, 1);
        float[] norm = randomFloats(rnd, RANK, 1);
        int[] pos = {0, 5, 9};
        int[] pages = {2, 5, 2};
        int[] offsets = {3, 0, 1};
        try (Tensor a = CPU.fromFloats(kvA, DType.F32, n, WIDTH); Tensor w = CPU.fromFloats(norm, DType.F32, RANK);
             Tensor p = CPU.fromInts(pos, n); Tensor pg = CPU.fromInts(pages, n); Tensor off = CPU.fromInts(offsets, n);
             Tensor pool = CPU.zeros(DType.F32, 2, PAGES, 1, PAGE, 1, WIDTH)) {
            CPU.ops().latentAppend(a, w, 1e-6f, p, ROPE_PARAMS, pool, LAYER, pg, off);
            float[] got = CPU.toFloats(pool);
            double[] expected = new double[got.length];
            for (int t = 0; t < n; t++) {
                double ss = 0;
                for (int c = 0; c < RANK; c++) {
                    ss += (double) kvA[t * WIDTH + c] * kvA[t * WIDTH + c];
                }
                double inv = 1 / Math.sqrt(ss / RANK + 1e-6);
                int at = slot(pages[t], offsets[t]);
                for (int c = 0; c < RANK; c++) {
                    expected[at + c] = kvA[t * WIDTH + c] * inv * norm[c];
                }
                System.arraycopy(rotated(kvA, t * WIDTH + RANK, pos[t]), 0, expected, at + RANK, ROPE);
            }
            assertClose(expected, got, 1e-6);
            assertThatThrownBy(() -> CPU.ops().kvAppend(pool, LAYER, a, a, pg, off))
                    .hasMessageContaining("latent pool");
        }
    }

    @Test
    void theAbsorbedChainEqualsAttentionOverDecompressedKeysAndValues() {
        Random rnd = new Random(2);
        // sequence 0: 3 queries over 7 keys (a chunk after 4 cached tokens); sequence 1: one decode query over 5
        int[] kvLens = {7, 5};
        int[] qLens = {3, 1};
        int[][] pagesOf = {{3, 1}, {4, 2}};
        int[] qoIndptr = {0, 3, 4};
        int totalQo = 4;
        float[] poolValues = new float[2 * PAGES * PAGE * WIDTH];
        float[][][] rows = new float[2][][];
        for (int s = 0; s < 2; s++) {
            rows[s] = new float[kvLens[s]][];
            for (int j = 0; j < kvLens[s]; j++) {
                rows[s][j] = randomFloats(rnd, WIDTH, 1);
                System.arraycopy(rows[s][j], 0, poolValues, slot(pagesOf[s][j / PAGE], j % PAGE), WIDTH);
            }
        }
        float[] q = randomFloats(rnd, totalQo * HEADS * (NOPE + ROPE), 1);
        float[] kvB = randomFloats(rnd, HEADS * (NOPE + VALUE) * RANK, 0.3);
        int[] pos = {4, 5, 6, 4};
        float scale = (float) (1 / Math.sqrt(NOPE + ROPE));
        try (Tensor pool = CPU.fromFloats(poolValues, DType.F32, 2, PAGES, 1, PAGE, 1, WIDTH);
             Tensor qt = CPU.fromFloats(q, DType.F32, totalQo, HEADS, NOPE + ROPE);
             Tensor w = CPU.fromFloats(kvB, DType.F32, HEADS, NOPE + VALUE, RANK);
             Tensor p = CPU.fromInts(pos, totalQo);
             Tensor qo = CPU.fromInts(qoIndptr, 3); Tensor kv = CPU.fromInts(new int[] {0, 2, 4}, 3);
             Tensor idx = CPU.fromInts(new int[] {3, 1, 4, 2}, 4); Tensor last = CPU.fromInts(new int[] {3, 1}, 2);
             Tensor qLatent = CPU.allocate(DType.F32, totalQo, HEADS, WIDTH);
             Tensor latent = CPU.allocate(DType.F32, totalQo, HEADS, RANK);
             Tensor out = CPU.allocate(DType.F32, totalQo, HEADS, VALUE)) {
            PagedAttentionPlan plan = new PagedAttentionPlan(2, qo, kv, idx, last, PAGE, totalQo, 3, 7, true, -1,
                    false, scale);
            CPU.ops().latentQuery(qt, w, p, ROPE_PARAMS, qLatent);
            CPU.ops().latentAttention(qLatent, pool, LAYER, plan, latent);
            CPU.ops().latentValues(latent, w, out);

            double[] expected = new double[totalQo * HEADS * VALUE];
            for (int s = 0; s < 2; s++) {
                for (int i = 0; i < qLens[s]; i++) {
                    int row = qoIndptr[s] + i;
                    int visible = kvLens[s] - qLens[s] + i + 1;
                    for (int h = 0; h < HEADS; h++) {
                        int qAt = (row * HEADS + h) * (NOPE + ROPE);
                        double[] qRope = rotated(q, qAt + NOPE, pos[row]);
                        double[] scores = new double[visible];
                        double[][] values = new double[visible][VALUE];
                        double max = Double.NEGATIVE_INFINITY;
                        for (int j = 0; j < visible; j++) {
                            float[] c = rows[s][j];
                            double dot = 0;
                            for (int d = 0; d < NOPE; d++) {
                                double key = 0;
                                for (int r = 0; r < RANK; r++) {
                                    key += (double) kvB[(h * (NOPE + VALUE) + d) * RANK + r] * c[r];
                                }
                                dot += q[qAt + d] * key;
                            }
                            for (int e = 0; e < ROPE; e++) {
                                dot += qRope[e] * c[RANK + e];
                            }
                            for (int v = 0; v < VALUE; v++) {
                                for (int r = 0; r < RANK; r++) {
                                    values[j][v] += (double) kvB[(h * (NOPE + VALUE) + NOPE + v) * RANK + r] * c[r];
                                }
                            }
                            scores[j] = dot * scale;
                            max = Math.max(max, scores[j]);
                        }
                        double sum = 0;
                        for (int j = 0; j < visible; j++) {
                            scores[j] = Math.exp(scores[j] - max);
                            sum += scores[j];
                        }
                        for (int j = 0; j < visible; j++) {
                            for (int v = 0; v < VALUE; v++) {
                                expected[(row * HEADS + h) * VALUE + v] += scores[j] / sum * values[j][v];
                            }
                        }
                    }
                }
            }
            assertClose(expected, CPU.toFloats(out), 1e-5);
        }
    }
}
