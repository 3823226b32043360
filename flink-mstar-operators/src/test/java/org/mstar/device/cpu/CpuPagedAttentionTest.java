package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.device.cpu.OpsTestSupport.assertClose;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.PagedAttentionPlan;

class CpuPagedAttentionTest {
    private static final CpuDevice SERIAL = new CpuDevice(1);
    private static final CpuDevice PARALLEL = new CpuDevice(4);
    private static final int LAYERS = 2;
    private static final int LAYER = 1;

    @AfterAll
    static void close() {
        SERIAL.close();
        PARALLEL.close();
    }

    /** One sequence: {@code kvLen} tokens in the cache, of which the last {@code qLen} are this step's queries. */
    private record Seq(int kvLen, int qLen) {}

    /** The masks of one call. */
    private record Mask(boolean causal, int windowLeft, boolean contextOnly) {}

    /**
     * A batch laid out in a pool: per-sequence K/V {@code [kvLen, kvHeads, headDim]} in logical order, the
     * same values scattered over shuffled pages, and the queries.
     */
    private static final class Batch {
        final List<Seq> seqs;
        final int qoHeads;
        final int kvHeads;
        final int headDim;
        final int pageSize;
        final float[][] keys;
        final float[][] values;
        final float[] q;
        final float[] pool;
        final int poolPages;
        final int[] qoIndptr;
        final int[] kvIndptr;
        final int[] kvIndices;
        final int[] lastPageLen;

        Batch(long seed, List<Seq> seqs, int qoHeads, int kvHeads, int headDim, int pageSize, DType dtype) {
            Random rnd = new Random(seed);
            this.seqs = seqs;
            this.qoHeads = qoHeads;
            this.kvHeads = kvHeads;
            this.headDim = headDim;
            this.pageSize = pageSize;
            int rows = seqs.size();
            int tokenElems = kvHeads * headDim;
            qoIndptr = new int[rows + 1];
            kvIndptr = new int[rows + 1];
            lastPageLen = new int[rows];
            int totalPages = 0;
            for (int r = 0; r < rows; r++) {
                Seq s = seqs.get(r);
                int pages = (s.kvLen() + pageSize - 1) / pageSize;
                qoIndptr[r + 1] = qoIndptr[r] + s.qLen();
                kvIndptr[r + 1] = kvIndptr[r] + pages;
                lastPageLen[r] = s.kvLen() - (pages - 1) * pageSize;
                totalPages += pages;
            }
            // spare pages that no sequence owns, and a shuffled assignment of the rest
            poolPages = totalPages + 5;
            List<Integer> ids = new ArrayList<>();
            for (int p = 0; p < poolPages; p++) {
                ids.add(p);
            }
            Collections.shuffle(ids, rnd);
            kvIndices = new int[totalPages];
            for (int i = 0; i < totalPages; i++) {
                kvIndices[i] = ids.get(i);
            }
            int pageElems = 2 * pageSize * tokenElems;
            // every slot starts as junk (including the other layer), so reading a wrong one shows
            pool = randomFloats(rnd, LAYERS * poolPages * pageElems, 3.0);
            keys = new float[rows][];
            values = new float[rows][];
            for (int r = 0; r < rows; r++) {
                int kvLen = seqs.get(r).kvLen();
                keys[r] = randomFloats(rnd, kvLen * tokenElems, 1.0);
                values[r] = randomFloats(rnd, kvLen * tokenElems, 1.0);
                if (dtype == DType.BF16) {
                    keys[r] = CpuDevice.roundedToBf16(keys[r]);
                    values[r] = CpuDevice.roundedToBf16(values[r]);
                }
                for (int j = 0; j < kvLen; j++) {
                    int page = kvIndices[kvIndptr[r] + j / pageSize];
                    int base = (LAYER * poolPages + page) * pageElems;
                    int slot = j % pageSize;
                    System.arraycopy(keys[r], j * tokenElems, pool, base + slot * tokenElems, tokenElems);
                    System.arraycopy(values[r], j * tokenElems, pool, base + (pageSize + slot) * tokenElems, tokenElems);
                }
            }
            float[] queries = randomFloats(rnd, qoIndptr[rows] * qoHeads * headDim, 1.0);
            q = dtype == DType.BF16 ? CpuDevice.roundedToBf16(queries) : queries;
        }

        int totalQo() {
            return qoIndptr[seqs.size()];
        }

        /** Attention in double straight from the plan's definitions. */
        double[] expected(Mask mask, float smScale) {
            double[] out = new double[q.length];
            int group = qoHeads / kvHeads;
            for (int r = 0; r < seqs.size(); r++) {
                int kvLen = seqs.get(r).kvLen();
                int qLen = seqs.get(r).qLen();
                for (int i = 0; i < qLen; i++) {
                    int pos = kvLen - qLen + i;
                    List<Integer> visible = new ArrayList<>();
                    for (int j = 0; j < kvLen; j++) {
                        boolean seen = (!mask.causal() || j <= pos)
                                && (mask.windowLeft() < 0 || j >= pos - mask.windowLeft())
                                && (!mask.contextOnly() || j < kvLen - qLen);
                        if (seen) {
                            visible.add(j);
                        }
                    }
                    for (int h = 0; h < qoHeads; h++) {
                        int qBase = ((qoIndptr[r] + i) * qoHeads + h) * headDim;
                        int kvHead = h / group;
                        if (visible.isEmpty()) {
                            continue; // zeros
                        }
                        double[] score = new double[visible.size()];
                        double max = Double.NEGATIVE_INFINITY;
                        for (int v = 0; v < score.length; v++) {
                            int kBase = (visible.get(v) * kvHeads + kvHead) * headDim;
                            double dot = 0;
                            for (int d = 0; d < headDim; d++) {
                                dot += (double) q[qBase + d] * keys[r][kBase + d];
                            }
                            score[v] = smScale * dot;
                            max = Math.max(max, score[v]);
                        }
                        double sum = 0;
                        for (int v = 0; v < score.length; v++) {
                            score[v] = Math.exp(score[v] - max);
                            sum += score[v];
                        }
                        for (int v = 0; v < score.length; v++) {
                            int vBase = (visible.get(v) * kvHeads + kvHead) * headDim;
                            for (int d = 0; d < headDim; d++) {
                                out[qBase + d] += score[v] / sum * values[r][vBase + d];
                            }
                        }
                    }
                }
            }
            return out;
        }

        float[] run(CpuDevice device, DType dtype, Mask mask, float smScale) {
            int maxQo = 0;
            int maxKv = 0;
            for (Seq s : seqs) {
                maxQo = Math.max(maxQo, s.qLen());
                maxKv = Math.max(maxKv, s.kvLen());
            }
            PagedAttentionPlan plan = new PagedAttentionPlan(seqs.size(),
                    device.fromInts(qoIndptr, qoIndptr.length), device.fromInts(kvIndptr, kvIndptr.length),
                    device.fromInts(kvIndices, kvIndices.length), device.fromInts(lastPageLen, lastPageLen.length),
                    pageSize, totalQo(), maxQo, maxKv, mask.causal(), mask.windowLeft(), mask.contextOnly(), smScale);
            CpuTensor poolT = device.fromFloats(pool, dtype, LAYERS, poolPages, 2, pageSize, kvHeads, headDim);
            CpuTensor qT = device.fromFloats(q, dtype, totalQo(), qoHeads, headDim);
            CpuTensor out = device.fromFloats(randomFloats(new Random(7), q.length, 5.0), dtype, totalQo(), qoHeads, headDim);
            device.ops().pagedAttention(qT, poolT, LAYER, plan, out);
            return device.toFloats(out);
        }
    }

    /** Prefill chunk after context, decode rows, a whole prompt, a first token; pages of 8. */
    private static final List<Seq> MIXED = List.of(
            new Seq(37, 13), new Seq(50, 1), new Seq(20, 20), new Seq(1, 1), new Seq(16, 1), new Seq(9, 4));

    private static void check(Batch b, Mask mask, DType dtype, double tol) {
        float smScale = (float) (0.9 / Math.sqrt(b.headDim));
        double[] expected = b.expected(mask, smScale);
        float[] serial = b.run(SERIAL, dtype, mask, smScale);
        assertClose(expected, serial, tol);
        // threads split the (sequence, head) units, never a sum: bit for bit the same
        assertThat(b.run(PARALLEL, dtype, mask, smScale)).isEqualTo(serial);
    }

    @Test
    void causalRaggedBatchWithGroupedHeads() {
        Batch b = new Batch(1, MIXED, 8, 2, 32, 8, DType.F32);
        check(b, new Mask(true, -1, false), DType.F32, 1e-5);
    }

    @Test
    void nonCausalSeesTheWholeSequence() {
        Batch b = new Batch(2, MIXED, 8, 2, 32, 8, DType.F32);
        check(b, new Mask(false, -1, false), DType.F32, 1e-5);
    }

    @Test
    void slidingWindowCausalAndNot() {
        Batch b = new Batch(3, MIXED, 4, 4, 16, 8, DType.F32);
        check(b, new Mask(true, 5, false), DType.F32, 1e-5);
        check(b, new Mask(true, 0, false), DType.F32, 1e-5);
        check(b, new Mask(false, 7, false), DType.F32, 1e-5);
    }

    @Test
    void contextOnlyHidesThisStepsTokens() {
        Batch b = new Batch(4, MIXED, 6, 3, 16, 4, DType.F32);
        Mask mask = new Mask(true, -1, true);
        check(b, mask, DType.F32, 1e-5);
        // the whole prompt (20, 20) and the first token (1, 1) have no context: zeros
        float[] out = b.run(SERIAL, DType.F32, mask, 0.25f);
        int width = b.qoHeads * b.headDim;
        for (int row = b.qoIndptr[2] * width; row < b.qoIndptr[4] * width; row++) {
            assertThat(out[row]).isZero();
        }
        check(b, new Mask(false, 3, true), DType.F32, 1e-5);
    }

    @Test
    void multiQueryAndOnePagePerToken() {
        Batch b = new Batch(5, MIXED, 4, 1, 8, 1, DType.F32);
        check(b, new Mask(true, -1, false), DType.F32, 1e-5);
    }

    @Test
    void bf16PoolQueriesAndOutput() {
        Batch b = new Batch(6, MIXED, 8, 2, 64, 16, DType.BF16);
        check(b, new Mask(true, -1, false), DType.BF16, 1e-2);
        check(b, new Mask(true, 4, false), DType.BF16, 1e-2);
    }

    @Test
    void decodeOnlyBatch() {
        Batch b = new Batch(7, List.of(new Seq(70, 1), new Seq(3, 1), new Seq(64, 1)), 16, 4, 32, 16, DType.F32);
        check(b, new Mask(true, -1, false), DType.F32, 1e-5);
        check(b, new Mask(true, 31, false), DType.F32, 1e-5);
    }
}
