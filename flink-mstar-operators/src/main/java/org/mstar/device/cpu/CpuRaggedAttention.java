package org.mstar.device.cpu;

import java.util.Arrays;
import org.mstar.device.RaggedAttentionPlan;
import org.mstar.device.Tensor;

/**
 * Ragged attention as {@link RaggedAttentionPlan} defines it, one work unit per (span, query head): the unit
 * widens its span's keys and values of the head's KV head to fp32 once, then per query row takes scores
 * {@code smScale · (q · k)} as fp32 dot products over the keys the mask shows it, a max-subtracted softmax in
 * fp32 and the weighted sum of values divided by the weight sum, rounded once on store.
 */
final class CpuRaggedAttention {
    private final CpuTensor q;
    private final CpuTensor k;
    private final CpuTensor v;
    private final CpuTensor out;
    private final RaggedAttentionPlan plan;
    private final int[] qIndptr;
    private final int[] kvIndptr;
    private final int qoHeads;
    private final int kvHeads;
    private final int headDim;
    private final int groupSize;

    private CpuRaggedAttention(CpuTensor q, CpuTensor k, CpuTensor v, RaggedAttentionPlan plan, CpuTensor out) {
        this.q = q;
        this.k = k;
        this.v = v;
        this.out = out;
        this.plan = plan;
        if (q.rank() != 3 || k.rank() != 3 || !Arrays.equals(k.shape(), v.shape()) || q.dim(2) != k.dim(2)) {
            throw new IllegalArgumentException("raggedAttention: q " + q + " needs [n, qoHeads, headDim] and k " + k
                    + ", v " + v + " one [m, kvHeads, headDim] shape");
        }
        if (!Arrays.equals(out.shape(), q.shape())) {
            throw new IllegalArgumentException("raggedAttention: out " + out + " must have q's shape " + q);
        }
        this.qoHeads = (int) q.dim(1);
        this.kvHeads = (int) k.dim(1);
        this.headDim = (int) q.dim(2);
        if (qoHeads % kvHeads != 0) {
            throw new IllegalArgumentException("raggedAttention: " + qoHeads + " query heads do not group over "
                    + kvHeads + " KV heads");
        }
        this.groupSize = qoHeads / kvHeads;
        this.qIndptr = ints(plan.qIndptr());
        this.kvIndptr = ints(plan.kvIndptr());
        checkIndptr("qIndptr", qIndptr, plan.totalQ(), q.dim(0));
        checkIndptr("kvIndptr", kvIndptr, plan.totalKv(), k.dim(0));
    }

    static void run(ParallelLoop loop, CpuTensor q, CpuTensor k, CpuTensor v, RaggedAttentionPlan plan, CpuTensor out) {
        CpuRaggedAttention attn = new CpuRaggedAttention(q, k, v, plan, out);
        long avgCost = (long) Math.max(1, plan.maxQLen()) * Math.max(1, plan.maxKvLen()) * attn.headDim;
        loop.forChunks(plan.rows() * attn.qoHeads, avgCost, attn::units);
    }

    private static int[] ints(Tensor t) {
        return CpuTensor.of(t).toIntArray();
    }

    private void checkIndptr(String name, int[] indptr, int total, long tensorRows) {
        int rows = plan.rows();
        if (indptr.length < rows + 1 || indptr[0] != 0 || indptr[rows] != total || total > tensorRows) {
            throw new IllegalArgumentException("raggedAttention: " + name + " " + Arrays.toString(indptr) + " for "
                    + rows + " spans covering " + total + " of " + tensorRows + " rows");
        }
        for (int r = 0; r < rows; r++) {
            if (indptr[r] > indptr[r + 1]) {
                throw new IllegalArgumentException("raggedAttention: " + name + " " + Arrays.toString(indptr)
                        + " decreases at span " + r);
            }
        }
    }

    /** Work units {@code [from, to)}, unit u being span {@code u / qoHeads}, query head {@code u % qoHeads}. */
    private void units(int from, int to) {
        float[] query = new float[headDim];
        float[] acc = new float[headDim];
        for (int u = from; u < to; u++) {
            attendUnit(u / qoHeads, u % qoHeads, query, acc);
        }
    }

    private void attendUnit(int r, int h, float[] query, float[] acc) {
        int qLen = qIndptr[r + 1] - qIndptr[r];
        int kvLen = kvIndptr[r + 1] - kvIndptr[r];
        if (qLen == 0) {
            return;
        }
        int kvHead = h / groupSize;
        float[][] keys = new float[kvLen][headDim];
        float[][] values = new float[kvLen][headDim];
        for (int j = 0; j < kvLen; j++) {
            int base = ((kvIndptr[r] + j) * kvHeads + kvHead) * headDim;
            FloatRows.read(k, base, keys[j], 0, headDim);
            FloatRows.read(v, base, values[j], 0, headDim);
        }
        float[] scores = new float[kvLen];
        for (int i = 0; i < qLen; i++) {
            int base = ((qIndptr[r] + i) * qoHeads + h) * headDim;
            int end = plan.visibleEnd(qLen, kvLen, i);
            Arrays.fill(acc, 0f);
            if (end > 0) {
                FloatRows.read(q, base, query, 0, headDim);
                SoftmaxRow.attend(query, keys, values, 0, end, plan.smScale(), scores, acc);
            }
            FloatRows.write(acc, 0, out, base, headDim);
        }
    }
}
