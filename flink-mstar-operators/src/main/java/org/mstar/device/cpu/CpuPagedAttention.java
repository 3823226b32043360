package org.mstar.device.cpu;

import java.util.Arrays;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.Tensor;

/**
 * Paged attention as {@link PagedAttentionPlan} defines it, one work unit per (sequence, query head).
 * A unit widens the keys and values its queries can see to fp32 once, then per query row: scores
 * {@code smScale · (q · k)} as fp32 dot products, a max-subtracted softmax in fp32, and the weighted sum
 * of values divided by the weight sum, rounded once on store. Prefill and decode share this path.
 */
final class CpuPagedAttention {
    private final CpuTensor q;
    private final CpuTensor pool;
    private final CpuTensor out;
    private final int layer;
    private final PagedAttentionPlan plan;
    private final KvPoolGeometry geometry;
    private final int[] qoIndptr;
    private final int[] kvIndptr;
    private final int[] kvIndices;
    private final int[] lastPageLen;
    private final int qoHeads;
    private final int headDim;
    private final int groupSize;

    private CpuPagedAttention(CpuTensor q, CpuTensor pool, int layer, PagedAttentionPlan plan, CpuTensor out) {
        this.q = q;
        this.pool = pool;
        this.out = out;
        this.layer = layer;
        this.plan = plan;
        this.geometry = new KvPoolGeometry(pool);
        this.qoIndptr = ints(plan.qoIndptr());
        this.kvIndptr = ints(plan.kvIndptr());
        this.kvIndices = ints(plan.kvIndices());
        this.lastPageLen = ints(plan.lastPageLen());
        if (q.rank() != 3 || q.dim(2) != geometry.headDim() || q.dim(1) % geometry.kvHeads() != 0) {
            throw new IllegalArgumentException("attention query " + q + " against a pool of "
                    + geometry.kvHeads() + " KV heads of " + geometry.headDim());
        }
        if (out.size() != q.size()) {
            throw new IllegalArgumentException("attention output " + out + " for query " + q);
        }
        if (layer < 0 || layer >= geometry.layers()) {
            throw new IndexOutOfBoundsException("layer " + layer + " outside pool of " + geometry.layers());
        }
        if (plan.pageSize() != geometry.pageSize()) {
            throw new IllegalArgumentException("plan page size " + plan.pageSize() + " but pool pages hold " + geometry.pageSize());
        }
        this.qoHeads = (int) q.dim(1);
        this.headDim = geometry.headDim();
        this.groupSize = qoHeads / geometry.kvHeads();
        checkPlan((int) q.dim(0));
    }

    static void run(ParallelLoop loop, CpuTensor q, CpuTensor pool, int layer, PagedAttentionPlan plan, CpuTensor out) {
        CpuPagedAttention attn = new CpuPagedAttention(q, pool, layer, plan, out);
        long avgCost = (long) plan.maxQoLen() * Math.max(1, plan.maxKvLen()) * attn.headDim;
        loop.forChunks(plan.rows() * attn.qoHeads, avgCost, attn::units);
    }

    private static int[] ints(Tensor t) {
        return CpuTensor.of(t).toIntArray();
    }

    private void checkPlan(int qRows) {
        int rows = plan.rows();
        if (qoIndptr.length < rows + 1 || kvIndptr.length < rows + 1 || lastPageLen.length < rows) {
            throw new IllegalArgumentException("plan index tensors too short for " + rows + " rows");
        }
        for (int r = 0; r < rows; r++) {
            if (qoIndptr[r] < 0 || qoIndptr[r] > qoIndptr[r + 1] || qoIndptr[r + 1] > qRows) {
                throw new IllegalArgumentException("qoIndptr " + Arrays.toString(qoIndptr) + " for " + qRows + " query rows");
            }
            if (kvIndptr[r] < 0 || kvIndptr[r] > kvIndptr[r + 1] || kvIndptr[r + 1] > kvIndices.length) {
                throw new IllegalArgumentException("kvIndptr " + Arrays.toString(kvIndptr) + " for "
                        + kvIndices.length + " page indices");
            }
            if (kvIndptr[r + 1] > kvIndptr[r] && (lastPageLen[r] < 1 || lastPageLen[r] > plan.pageSize())) {
                throw new IllegalArgumentException("lastPageLen " + lastPageLen[r] + " of row " + r
                        + " outside [1, " + plan.pageSize() + "]");
            }
        }
    }

    /** Work units {@code [from, to)}, unit u being sequence {@code u / qoHeads}, query head {@code u % qoHeads}. */
    private void units(int from, int to) {
        float[] query = new float[headDim];
        float[] acc = new float[headDim];
        for (int u = from; u < to; u++) {
            attendUnit(u / qoHeads, u % qoHeads, query, acc);
        }
    }

    private void attendUnit(int r, int h, float[] query, float[] acc) {
        int qLen = qoIndptr[r + 1] - qoIndptr[r];
        if (qLen == 0) {
            return;
        }
        int pages = kvIndptr[r + 1] - kvIndptr[r];
        int kvLen = pages == 0 ? 0 : (pages - 1) * plan.pageSize() + lastPageLen[r];
        // key ranges only grow with the query index, so the first and last queries bound the union
        int lo = firstVisible(kvLen, qLen, 0);
        int hi = endVisible(kvLen, qLen, qLen - 1);
        int kvHead = h / groupSize;
        int visible = Math.max(0, hi - lo);
        float[][] keys = new float[visible][headDim];
        float[][] values = new float[visible][headDim];
        for (int j = lo; j < hi; j++) {
            int page = kvIndices[kvIndptr[r] + j / plan.pageSize()];
            int slot = j % plan.pageSize();
            int head = kvHead * headDim;
            FloatRows.read(pool, geometry.slot(layer, page, 0, slot) + head, keys[j - lo], 0, headDim);
            FloatRows.read(pool, geometry.slot(layer, page, 1, slot) + head, values[j - lo], 0, headDim);
        }
        float[] scores = new float[visible];
        for (int i = 0; i < qLen; i++) {
            int row = qoIndptr[r] + i;
            int base = (row * qoHeads + h) * headDim;
            int from = firstVisible(kvLen, qLen, i);
            int to = endVisible(kvLen, qLen, i);
            Arrays.fill(acc, 0f);
            if (from < to) {
                FloatRows.read(q, base, query, 0, headDim);
                SoftmaxRow.attend(query, keys, values, from - lo, to - lo, plan.smScale(), scores, acc);
            }
            FloatRows.write(acc, 0, out, base, headDim);
        }
    }

    /** First key position query i may see (window), given the sequence's KV and query lengths. */
    private int firstVisible(int kvLen, int qLen, int i) {
        int pos = kvLen - qLen + i;
        return plan.windowLeft() >= 0 ? Math.max(0, pos - plan.windowLeft()) : 0;
    }

    /** One past the last key position query i may see (causal, context-only). */
    private int endVisible(int kvLen, int qLen, int i) {
        int pos = kvLen - qLen + i;
        int end = plan.causal() ? Math.min(kvLen, pos + 1) : kvLen;
        return plan.contextOnly() ? Math.min(end, kvLen - qLen) : end;
    }
}
