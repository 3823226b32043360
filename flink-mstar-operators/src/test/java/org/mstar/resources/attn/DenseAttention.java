package org.mstar.resources.attn;

/**
 * The reference the attention tests compare against: plain loops over full matrices, in double precision.
 * Tokens are packed {@code [n, heads, headDim]} arrays; query span r covers rows {@code [qStart[r],
 * qStart[r] + qLen[r])} and attends key rows {@code [kvStart[r], kvStart[r] + kvLen[r])} where the mask allows.
 */
final class DenseAttention {
    private DenseAttention() {}

    /** Whether query i of a span of qLen queries over kvLen keys sees key j. */
    @FunctionalInterface
    interface Mask {
        boolean sees(int i, int j, int qLen, int kvLen);
    }

    static final Mask FULL = (i, j, qLen, kvLen) -> true;
    static final Mask CAUSAL = (i, j, qLen, kvLen) -> j <= kvLen - qLen + i;

    /** Token i of a span sees every key of its own block and the blocks before it. */
    static Mask blockCausal(int block) {
        return (i, j, qLen, kvLen) -> j / block <= i / block;
    }

    static float[] attend(float[] q, float[] k, float[] v, int[] qSpans, int[] kvSpans, int qoHeads, int kvHeads,
                          int headDim, Mask mask) {
        float[] out = new float[q.length];
        double scale = 1 / Math.sqrt(headDim);
        int group = qoHeads / kvHeads;
        int qStart = 0;
        int kvStart = 0;
        for (int r = 0; r < qSpans.length; r++) {
            for (int i = 0; i < qSpans[r]; i++) {
                for (int h = 0; h < qoHeads; h++) {
                    int qBase = ((qStart + i) * qoHeads + h) * headDim;
                    double[] scores = new double[kvSpans[r]];
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = 0; j < kvSpans[r]; j++) {
                        if (!mask.sees(i, j, qSpans[r], kvSpans[r])) {
                            scores[j] = Double.NEGATIVE_INFINITY;
                            continue;
                        }
                        int kBase = ((kvStart + j) * kvHeads + h / group) * headDim;
                        double dot = 0;
                        for (int d = 0; d < headDim; d++) {
                            dot += (double) q[qBase + d] * k[kBase + d];
                        }
                        scores[j] = dot * scale;
                        max = Math.max(max, scores[j]);
                    }
                    if (max == Double.NEGATIVE_INFINITY) {
                        continue; // nothing visible: zeros
                    }
                    double sum = 0;
                    double[] acc = new double[headDim];
                    for (int j = 0; j < kvSpans[r]; j++) {
                        if (scores[j] == Double.NEGATIVE_INFINITY) {
                            continue;
                        }
                        double w = Math.exp(scores[j] - max);
                        sum += w;
                        int vBase = ((kvStart + j) * kvHeads + h / group) * headDim;
                        for (int d = 0; d < headDim; d++) {
                            acc[d] += w * v[vBase + d];
                        }
                    }
                    for (int d = 0; d < headDim; d++) {
                        out[qBase + d] = (float) (acc[d] / sum);
                    }
                }
            }
            qStart += qSpans[r];
            kvStart += kvSpans[r];
        }
        return out;
    }
}
