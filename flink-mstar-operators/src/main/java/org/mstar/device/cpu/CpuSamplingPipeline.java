package org.mstar.device.cpu;

import java.util.Arrays;
import org.mstar.device.DType;
import org.mstar.device.SamplingBatch;

/**
 * Steps 1-6 of the sampler ({@link SamplingBatch}), one row at a time in fp32: penalty, softmax (or the
 * greedy one-hot), min-p, top-k/top-p, stop-id masking.
 *
 * <p>Ranking for top-k and top-p: descending probability, ties by lower index; top-k keeps exactly the
 * first k of that order. {@code topK <= 0} and {@code topP >= 1} are off. A filter that removes nothing
 * does not renormalise, so disabled filters leave the probabilities bit for bit unchanged; sums run in
 * index order (ranked order for top-p's cumulative mass).
 */
final class CpuSamplingPipeline {
    private final SamplingBatch batch;
    private final int vocab;
    private final CpuTensor counts;
    private final int[] stopIds;

    private CpuSamplingPipeline(SamplingBatch batch, int vocab) {
        this.batch = batch;
        this.vocab = vocab;
        this.counts = batch.penaltyCounts() == null ? null : CpuTensor.of(batch.penaltyCounts());
        if (counts != null && counts.size() != (long) batch.rows() * vocab) {
            throw new IllegalArgumentException("penaltyCounts " + counts + " for " + batch.rows() + " rows of " + vocab);
        }
        this.stopIds = batch.stopIds() == null ? new int[0] : ints(CpuTensor.of(batch.stopIds()));
        for (int id : stopIds) {
            if (id < 0 || id >= vocab) {
                throw new IllegalArgumentException("stop id " + id + " outside vocab " + vocab);
            }
        }
    }

    static void run(ParallelLoop loop, CpuTensor logits, SamplingBatch batch, CpuTensor probs) {
        if (logits.dtype() != DType.F32 || probs.dtype() != DType.F32) {
            throw new IllegalArgumentException("samplingProbs takes F32 logits and probs, got " + logits + " and " + probs);
        }
        int vocab = (int) logits.dim(-1);
        int rows = batch.rows();
        if (logits.size() != (long) rows * vocab || probs.size() != logits.size()) {
            throw new IllegalArgumentException("samplingProbs of " + logits + " into " + probs + " for " + rows + " rows");
        }
        CpuSamplingPipeline pipeline = new CpuSamplingPipeline(batch, vocab);
        loop.forChunks(rows, (long) vocab * 16, (from, to) -> {
            float[] row = new float[vocab];
            for (int r = from; r < to; r++) {
                FloatRows.read(logits, r * vocab, row, 0, vocab);
                pipeline.row(r, row);
                FloatRows.write(row, 0, probs, r * vocab, vocab);
            }
        });
    }

    private static int[] ints(CpuTensor t) {
        int[] v = new int[t.size()];
        for (int i = 0; i < v.length; i++) {
            v[i] = t.getInt(i);
        }
        return v;
    }

    /** Logits of row r in, probabilities out, in place. */
    private void row(int r, float[] p) {
        if (counts != null) {
            penalise(r, p);
        }
        float temperature = CpuTensor.of(batch.temperature()).getFloat(r);
        if (temperature == 0f) {
            oneHotArgmax(p);
        } else {
            softmax(p, temperature);
        }
        float minP = CpuTensor.of(batch.minP()).getFloat(r);
        if (minP > 0f) {
            minP(p, minP);
        }
        if (batch.applyFilters()) {
            int topK = CpuTensor.of(batch.topK()).getInt(r);
            float topP = CpuTensor.of(batch.topP()).getFloat(r);
            int minKeep = CpuTensor.of(batch.topPMinKeep()).getInt(r);
            if (CpuTensor.of(batch.topPFirst()).getInt(r) == 0) {
                topKThenTopP(p, topK, topP, minKeep);
            } else {
                topPAndTopK(p, topK, topP, minKeep);
            }
        }
        if (CpuTensor.of(batch.maskStopIds()).getInt(r) != 0) {
            for (int id : stopIds) {
                p[id] = 0f;
            }
        }
    }

    private void penalise(int r, float[] l) {
        float penalty = CpuTensor.of(batch.repetitionPenalty()).getFloat(r);
        int base = r * vocab;
        for (int v = 0; v < vocab; v++) {
            float n = counts.getFloat(base + v);
            if (n > 0f) {
                float factor = (float) Math.pow(penalty, n);
                l[v] = l[v] > 0f ? l[v] / factor : l[v] * factor;
            }
        }
    }

    private static void oneHotArgmax(float[] p) {
        int best = 0;
        for (int v = 1; v < p.length; v++) {
            if (p[v] > p[best]) {
                best = v;
            }
        }
        Arrays.fill(p, 0f);
        p[best] = 1f;
    }

    private static void softmax(float[] p, float temperature) {
        float max = Float.NEGATIVE_INFINITY;
        for (int v = 0; v < p.length; v++) {
            p[v] = p[v] / temperature;
            max = Math.max(max, p[v]);
        }
        float sum = 0f;
        for (int v = 0; v < p.length; v++) {
            p[v] = (float) Math.exp(p[v] - max);
            sum += p[v];
        }
        for (int v = 0; v < p.length; v++) {
            p[v] = p[v] / sum;
        }
    }

    private static void minP(float[] p, float minP) {
        float max = 0f;
        for (float x : p) {
            max = Math.max(max, x);
        }
        float threshold = minP * max;
        boolean removed = false;
        for (int v = 0; v < p.length; v++) {
            if (p[v] > 0f && p[v] < threshold) {
                p[v] = 0f;
                removed = true;
            }
        }
        if (removed) {
            renormalise(p);
        }
    }

    /** FlashInfer order: top-k, then top-p over the renormalised top-k set. */
    private static void topKThenTopP(float[] p, int topK, float topP, int minKeep) {
        if (topK > 0) {
            long[] ranked = ranked(p);
            if (keepFirst(p, ranked, Math.min(topK, ranked.length))) {
                renormalise(p);
            }
        }
        if (topP < 1f) {
            long[] ranked = ranked(p);
            if (keepFirst(p, ranked, topPCount(p, ranked, topP, minKeep))) {
                renormalise(p);
            }
        }
    }

    /** Hugging Face order: top-p and top-k each on the full distribution; the kept set is their intersection. */
    private static void topPAndTopK(float[] p, int topK, float topP, int minKeep) {
        if (topK <= 0 && topP >= 1f) {
            return;
        }
        long[] ranked = ranked(p);
        int keep = ranked.length;
        if (topK > 0) {
            keep = Math.min(keep, topK);
        }
        if (topP < 1f) {
            keep = Math.min(keep, topPCount(p, ranked, topP, minKeep));
        }
        if (keepFirst(p, ranked, keep)) {
            renormalise(p);
        }
    }

    /** Length of the smallest ranked prefix whose mass reaches {@code topP}, at least {@code minKeep}. */
    private static int topPCount(float[] p, long[] ranked, float topP, int minKeep) {
        float cum = 0f;
        for (int i = 0; i < ranked.length; i++) {
            cum += p[token(ranked[i])];
            if (cum >= topP) {
                return Math.min(ranked.length, Math.max(i + 1, minKeep));
            }
        }
        return ranked.length;
    }

    /**
     * The tokens with nonzero probability, best first (descending probability, ties by lower index), each
     * encoded as one long so a primitive sort ranks them: for non-negative floats the bit pattern orders
     * like the value, so {@code MAX - bits} in the high word sorts descending and the index breaks ties.
     */
    private static long[] ranked(float[] p) {
        int nonzero = 0;
        for (float x : p) {
            if (x > 0f) {
                nonzero++;
            }
        }
        long[] keys = new long[nonzero];
        int n = 0;
        for (int v = 0; v < p.length; v++) {
            if (p[v] > 0f) {
                keys[n++] = ((long) (Integer.MAX_VALUE - Float.floatToRawIntBits(p[v])) << 32) | v;
            }
        }
        Arrays.sort(keys);
        return keys;
    }

    private static int token(long rankedKey) {
        return (int) rankedKey;
    }

    /** Zero every ranked token after the first {@code keep}; whether any was removed. */
    private static boolean keepFirst(float[] p, long[] ranked, int keep) {
        for (int i = keep; i < ranked.length; i++) {
            p[token(ranked[i])] = 0f;
        }
        return keep < ranked.length;
    }

    private static void renormalise(float[] p) {
        float sum = 0f;
        for (float x : p) {
            sum += x;
        }
        for (int v = 0; v < p.length; v++) {
            p[v] = p[v] / sum;
        }
    }
}
