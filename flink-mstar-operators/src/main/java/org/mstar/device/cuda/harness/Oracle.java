package org.mstar.device.cuda.harness;

import java.util.Arrays;
import org.mstar.device.DType;
import org.mstar.device.RopeParams;

/**
 * Plain host references, written from the op contracts, for the ops CpuDevice does not implement yet
 * (rope, paged attention, samplingProbs). The harness uses CpuDevice whenever it can and falls back to
 * these, saying so in the report.
 */
final class Oracle {
    private Oracle() {}

    /** RoPE on {@code x [n, heads, headDim]} (a copy), rounded to {@code dt} as the device stores it. */
    static float[] rope(float[] x, int n, int heads, int headDim, int[] pos, RopeParams p, DType dt) {
        float[] out = x.clone();
        int half = p.rotaryDim() / 2;
        for (int t = 0; t < n; t++) {
            for (int h = 0; h < heads; h++) {
                int base = (t * heads + h) * headDim;
                for (int i = 0; i < half; i++) {
                    float angle = pos[t] * (float) p.invFreq(i);
                    float c = (float) Math.cos(angle);
                    float s = (float) Math.sin(angle);
                    int i1 = base + (p.interleave() ? 2 * i : i);
                    int i2 = base + (p.interleave() ? 2 * i + 1 : i + half);
                    float x1 = x[i1];
                    float x2 = x[i2];
                    out[i1] = Twin.rounded(x1 * c - x2 * s, dt);
                    out[i2] = Twin.rounded(x2 * c + x1 * s, dt);
                }
            }
        }
        return out;
    }

    /** A paged-attention batch on the host: page tables as int arrays, the pool widened to fp32. */
    record AttentionCase(float[] q, float[] pool, int layer, int pages, int pageSize, int kvHeads, int headDim,
                         int qoHeads, int[] qoIndptr, int[] kvIndptr, int[] kvIndices, int[] lastPageLen,
                         boolean causal, int windowLeft, boolean contextOnly, float smScale) {}

    /** Dense attention per sequence in double precision, following PagedAttentionPlan's masks. */
    static float[] attention(AttentionCase c, DType dt) {
        float[] out = new float[c.q.length];
        int group = c.qoHeads / c.kvHeads;
        for (int r = 0; r + 1 < c.qoIndptr.length; r++) {
            int qLen = c.qoIndptr[r + 1] - c.qoIndptr[r];
            int pagesOfSeq = c.kvIndptr[r + 1] - c.kvIndptr[r];
            int kvLen = pagesOfSeq == 0 ? 0 : (pagesOfSeq - 1) * c.pageSize + c.lastPageLen[r];
            for (int i = 0; i < qLen; i++) {
                int qpos = kvLen - qLen + i;
                int hi = c.causal ? Math.min(kvLen, qpos + 1) : kvLen;
                if (c.contextOnly) {
                    hi = Math.min(hi, kvLen - qLen);
                }
                int lo = c.windowLeft >= 0 ? Math.max(0, qpos - c.windowLeft) : 0;
                int row = c.qoIndptr[r] + i;
                for (int h = 0; h < c.qoHeads; h++) {
                    int g = h / group;
                    int qBase = (row * c.qoHeads + h) * c.headDim;
                    double[] scores = new double[Math.max(0, hi - lo)];
                    double max = Double.NEGATIVE_INFINITY;
                    for (int pos = lo; pos < hi; pos++) {
                        int kBase = kvOffset(c, r, pos, 0, g);
                        double s = 0;
                        for (int d = 0; d < c.headDim; d++) {
                            s += (double) c.q[qBase + d] * c.pool[kBase + d];
                        }
                        s *= c.smScale;
                        scores[pos - lo] = s;
                        max = Math.max(max, s);
                    }
                    double sum = 0;
                    double[] acc = new double[c.headDim];
                    for (int pos = lo; pos < hi; pos++) {
                        double w = Math.exp(scores[pos - lo] - max);
                        sum += w;
                        int vBase = kvOffset(c, r, pos, 1, g);
                        for (int d = 0; d < c.headDim; d++) {
                            acc[d] += w * c.pool[vBase + d];
                        }
                    }
                    for (int d = 0; d < c.headDim; d++) {
                        out[qBase + d] = Twin.rounded(sum > 0 ? (float) (acc[d] / sum) : 0f, dt);
                    }
                }
            }
        }
        return out;
    }

    private static int kvOffset(AttentionCase c, int r, int pos, int kv, int g) {
        int page = c.kvIndices[c.kvIndptr[r] + pos / c.pageSize];
        int slot = pos % c.pageSize;
        return ((((c.layer * c.pages + page) * 2 + kv) * c.pageSize + slot) * c.kvHeads + g) * c.headDim;
    }

    /** One row's sampling parameters, as SamplingBatch holds them. */
    record SamplingRow(float temperature, int topK, float topP, float minP, float penalty, int topPFirst,
                       int minKeep, boolean maskStops) {}

    /** Steps 1-5 of the SamplingBatch javadoc for one row, sorting explicitly; sums in double. */
    static float[] samplingProbs(float[] logits, float[] counts, SamplingRow p, int[] stopIds, boolean applyFilters) {
        int vocab = logits.length;
        float[] l = logits.clone();
        if (counts != null && p.penalty() != 1f) {
            for (int v = 0; v < vocab; v++) {
                if (counts[v] > 0) {
                    float f = (float) Math.pow(p.penalty(), counts[v]);
                    l[v] = l[v] > 0 ? l[v] / f : l[v] * f;
                }
            }
        }
        float[] probs = new float[vocab];
        if (p.temperature() == 0f) {
            int best = 0;
            for (int v = 1; v < vocab; v++) {
                if (l[v] > l[best]) {
                    best = v;
                }
            }
            probs[best] = 1f;
        } else {
            float max = Float.NEGATIVE_INFINITY;
            for (float x : l) {
                max = Math.max(max, x / p.temperature());
            }
            double sum = 0;
            for (int v = 0; v < vocab; v++) {
                probs[v] = (float) Math.exp(l[v] / p.temperature() - max);
                sum += probs[v];
            }
            scale(probs, sum);
            if (p.minP() > 0) {
                float top = 0;
                for (float q : probs) {
                    top = Math.max(top, q);
                }
                for (int v = 0; v < vocab; v++) {
                    if (probs[v] < p.minP() * top) {
                        probs[v] = 0;
                    }
                }
                scale(probs, total(probs));
            }
            if (applyFilters && (p.topK() > 0 && p.topK() < vocab || p.topP() < 1f)) {
                keepPrefix(probs, p);
            }
        }
        if (p.maskStops() && stopIds != null) {
            for (int id : stopIds) {
                probs[id] = 0;
            }
        }
        return probs;
    }

    private static void keepPrefix(float[] probs, SamplingRow p) {
        int vocab = probs.length;
        Integer[] order = new Integer[vocab];
        Arrays.setAll(order, i -> i);
        Arrays.sort(order, (a, b) -> probs[a] != probs[b] ? Float.compare(probs[b], probs[a]) : Integer.compare(a, b));
        int k = p.topK() > 0 ? Math.min(p.topK(), vocab) : vocab;
        int keep = k;
        if (p.topP() < 1f) {
            int span = p.topPFirst() == 0 ? k : vocab;
            double pool = 0;
            for (int j = 0; j < span; j++) {
                pool += probs[order[j]];
            }
            double cum = 0;
            int prefix = span;
            for (int j = 0; j < span; j++) {
                cum += probs[order[j]];
                if (cum >= p.topP() * pool) {
                    prefix = j + 1;
                    break;
                }
            }
            keep = Math.min(k, Math.max(prefix, Math.max(1, p.minKeep())));
        }
        for (int j = keep; j < vocab; j++) {
            probs[order[j]] = 0;
        }
        scale(probs, total(probs));
    }

    private static double total(float[] probs) {
        double s = 0;
        for (float q : probs) {
            s += q;
        }
        return s;
    }

    private static void scale(float[] probs, double sum) {
        if (sum > 0) {
            for (int v = 0; v < probs.length; v++) {
                probs[v] = (float) (probs[v] / sum);
            }
        }
    }
}
