package org.mstar.device.cpu;

/** One query row's attention over rows of keys and values already widened to fp32, as the CPU attentions share it. */
final class SoftmaxRow {
    private SoftmaxRow() {}

    /**
     * Adds into {@code acc} the softmax-weighted sum of {@code values[from, to)}: scores
     * {@code smScale · (query · key)} as fp32 dot products (kept in {@code scores[from, to)}), a max-subtracted
     * softmax in fp32, and the sum divided by the weight sum.
     */
    static void attend(float[] query, float[][] keys, float[][] values, int from, int to, float smScale,
                       float[] scores, float[] acc) {
        int headDim = query.length;
        float max = Float.NEGATIVE_INFINITY;
        for (int j = from; j < to; j++) {
            float[] key = keys[j];
            float dot = 0f;
            for (int d = 0; d < headDim; d++) {
                dot += query[d] * key[d];
            }
            float s = smScale * dot;
            scores[j] = s;
            max = Math.max(max, s);
        }
        float sum = 0f;
        for (int j = from; j < to; j++) {
            float weight = (float) Math.exp(scores[j] - max);
            sum += weight;
            float[] value = values[j];
            // same index into both arrays, so the JIT can vectorise it
            for (int d = 0; d < headDim; d++) {
                acc[d] += weight * value[d];
            }
        }
        for (int d = 0; d < headDim; d++) {
            acc[d] /= sum;
        }
    }
}
