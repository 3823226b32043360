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
 * does not renormalise, so disabled filters leave the probabilities bit for bit unchanged. Normalising
 * sums accumulate in double (a long fp32 sum over 128k entries drifts by 1e-4); top-p measures mass in
 * exact fixed point ({@link #fixedMass}), as the CUDA kernel does, so both devices keep the same set.
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
        this.stopIds = batch.stopIds() == null ? new int[0] : CpuTensor.of(batch.stopIds()).toIntArray();
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

    /** Logits of row r in, probabilities out, in place. */
    private void row(int r, float[] p) {
        if (counts != null) {
            penalise(r, p);
        }
        float temperature = CpuTensor.of(batch.temperature()).getFloat(r);
        boolean maskStops = CpuTensor.of(batch.maskStopIds()).getInt(r) != 0;
        if (temperature == 0f) {
            if (maskStops) {
                // held-back stop ids cannot win the argmax: masking the one-hot would leave no mass
                for (int id : stopIds) {
                    p[id] = Float.NEGATIVE_INFINITY;
                }
            }
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
            topKTopP(p, topK, topP, minKeep, CpuTensor.of(batch.topPFirst()).getInt(r) != 0);
        }
        if (maskStops) {
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
        double sum = 0;
        for (int v = 0; v < p.length; v++) {
            p[v] = (float) Math.exp(p[v] - max);
            sum += p[v];
        }
        float total = (float) sum;
        for (int v = 0; v < p.length; v++) {
            p[v] = p[v] / total;
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

    /** Probability mass in units of 2^-40 (truncated): integer sums are exact in any order. */
    static long fixedMass(float p) {
        return (long) ((double) p * 0x1p40);
    }

    /**
     * Top-k and top-p both keep a prefix of the ranked order, so the result is one prefix. FlashInfer order
     * ({@code topPFirst == false}): top-p over the top-k set, measured against that set's mass (the same as
     * over the renormalised set); Hugging Face order: top-p over the full distribution. Either way the kept
     * length is {@code min(k, max(topP prefix, minKeep))}.
     */
    private static void topKTopP(float[] p, int topK, float topP, int minKeep, boolean topPFirst) {
        boolean useK = topK > 0 && topK < p.length;
        boolean useP = topP < 1f;
        if (!useK && !useP) {
            return;
        }
        long[] ranked = ranked(p);
        int k = useK ? Math.min(topK, ranked.length) : ranked.length;
        int keep = k;
        if (useP) {
            int poolSize = useK && !topPFirst ? k : ranked.length;
            long pool = 0;
            for (int i = 0; i < poolSize; i++) {
                pool += fixedMass(p[token(ranked[i])]);
            }
            long target = (long) Math.ceil((double) topP * (double) pool);
            if (target == 0) {
                return; // nothing to measure against: leave the row as it is
            }
            int prefix = ranked.length;
            long cum = 0;
            for (int i = 0; i < ranked.length; i++) {
                cum += fixedMass(p[token(ranked[i])]);
                if (cum >= target) {
                    prefix = i + 1;
                    break;
                }
            }
            keep = Math.min(k, Math.max(prefix, Math.max(1, minKeep)));
        }
        if (keepFirst(p, ranked, keep)) {
            renormalise(p);
        }
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
        double sum = 0;
        for (float x : p) {
            sum += x;
        }
        float total = (float) sum;
        for (int v = 0; v < p.length; v++) {
            p[v] = p[v] / total;
        }
    }
}
