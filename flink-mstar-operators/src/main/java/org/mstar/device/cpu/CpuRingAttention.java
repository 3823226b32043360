package org.mstar.device.cpu;

import java.util.Arrays;
import org.mstar.device.RingAttentionPlan;
import org.mstar.device.Tensor;

/**
 * Ring attention as {@link RingAttentionPlan} defines it, one work unit per (frame, query head): the unit
 * widens the frame's listed K/V rows of its KV head to fp32 once, then per query row takes fp32 dot products,
 * a max-subtracted softmax and the weighted sum of values divided by the weight sum, rounded once on store.
 */
final class CpuRingAttention {
    private final CpuTensor q;
    private final CpuTensor ring;
    private final CpuTensor out;
    private final int[] qoIndptr;
    private final int[] kvIndptr;
    private final int[] kvRows;
    private final float smScale;
    private final int qoHeads;
    private final int kvHeads;
    private final int headDim;

    private CpuRingAttention(CpuTensor q, CpuTensor ring, RingAttentionPlan plan, CpuTensor out) {
        if (ring.rank() != 4 || ring.dim(1) != 2) {
            throw new IllegalArgumentException("ring buffer must be [rows, 2, kvHeads, headDim], got " + ring);
        }
        this.kvHeads = (int) ring.dim(2);
        this.headDim = (int) ring.dim(3);
        if (q.rank() != 3 || q.dim(2) != headDim || q.dim(1) % kvHeads != 0) {
            throw new IllegalArgumentException("ring attention query " + q + " against " + kvHeads + " KV heads of " + headDim);
        }
        if (out.size() != q.size()) {
            throw new IllegalArgumentException("ring attention output " + out + " for query " + q);
        }
        this.q = q;
        this.ring = ring;
        this.out = out;
        this.qoIndptr = ints(plan.qoIndptr());
        this.kvIndptr = ints(plan.kvIndptr());
        this.kvRows = ints(plan.kvRows());
        this.smScale = plan.smScale();
        this.qoHeads = (int) q.dim(1);
        check(plan, (int) q.dim(0), (int) ring.dim(0));
    }

    static void run(ParallelLoop loop, CpuTensor q, CpuTensor ring, RingAttentionPlan plan, CpuTensor out) {
        CpuRingAttention attn = new CpuRingAttention(q, ring, plan, out);
        long unitCost = (long) Math.max(1, plan.maxKvLen()) * Math.max(1, plan.maxQoLen()) * attn.headDim;
        loop.forChunks(plan.segments() * attn.qoHeads, unitCost, attn::units);
    }

    private static int[] ints(Tensor t) {
        CpuTensor c = CpuTensor.of(t);
        int[] v = new int[c.size()];
        for (int i = 0; i < v.length; i++) v[i] = c.getInt(i);
        return v;
    }

    private void check(RingAttentionPlan plan, int qRows, int ringRows) {
        int s = plan.segments();
        if (qoIndptr.length < s + 1 || kvIndptr.length < s + 1) {
            throw new IllegalArgumentException("ring plan index tensors too short for " + s + " frames");
        }
        for (int i = 0; i < s; i++) {
            if (qoIndptr[i] < 0 || qoIndptr[i] > qoIndptr[i + 1] || qoIndptr[i + 1] > qRows) {
                throw new IllegalArgumentException("qoIndptr " + Arrays.toString(qoIndptr) + " for " + qRows + " query rows");
            }
            if (kvIndptr[i] < 0 || kvIndptr[i] > kvIndptr[i + 1] || kvIndptr[i + 1] > kvRows.length) {
                throw new IllegalArgumentException("kvIndptr " + Arrays.toString(kvIndptr) + " for " + kvRows.length + " rows");
            }
        }
        for (int row : kvRows) {
            if (row < 0 || row >= ringRows) {
                throw new IndexOutOfBoundsException("ring row " + row + " outside a buffer of " + ringRows);
            }
        }
    }

    private void units(int from, int to) {
        for (int u = from; u < to; u++) attendUnit(u / qoHeads, u % qoHeads);
    }

    private void attendUnit(int s, int h) {
        int kvLen = kvIndptr[s + 1] - kvIndptr[s];
        int kvHead = h / (qoHeads / kvHeads);
        float[][] keys = new float[kvLen][headDim];
        float[][] values = new float[kvLen][headDim];
        for (int j = 0; j < kvLen; j++) {
            int row = kvRows[kvIndptr[s] + j];
            FloatRows.read(ring, ((row * 2) * kvHeads + kvHead) * headDim, keys[j], 0, headDim);
            FloatRows.read(ring, ((row * 2 + 1) * kvHeads + kvHead) * headDim, values[j], 0, headDim);
        }
        float[] query = new float[headDim];
        float[] acc = new float[headDim];
        float[] scores = new float[kvLen];
        for (int row = qoIndptr[s]; row < qoIndptr[s + 1]; row++) {
            int base = (row * qoHeads + h) * headDim;
            Arrays.fill(acc, 0f);
            if (kvLen > 0) {
                FloatRows.read(q, base, query, 0, headDim);
                float max = Float.NEGATIVE_INFINITY;
                for (int j = 0; j < kvLen; j++) {
                    float dot = 0f;
                    for (int d = 0; d < headDim; d++) dot += query[d] * keys[j][d];
                    scores[j] = smScale * dot;
                    max = Math.max(max, scores[j]);
                }
                float sum = 0f;
                for (int j = 0; j < kvLen; j++) {
                    float weight = (float) Math.exp(scores[j] - max);
                    sum += weight;
                    for (int d = 0; d < headDim; d++) acc[d] += weight * values[j][d];
                }
                for (int d = 0; d < headDim; d++) acc[d] /= sum;
            }
            FloatRows.write(acc, 0, out, base, headDim);
        }
    }
}
