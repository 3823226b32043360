package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.offset;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.Philox;
import org.mstar.device.ProbabilitySampler;
import org.mstar.device.SamplingBatch;

/** samplingProbs (steps 1-6) on known distributions, and sampleFromProbs (step 7). */
class CpuSamplingTest {
    private static final CpuDevice DEVICE = new CpuDevice(3);

    @AfterAll
    static void close() {
        DEVICE.close();
    }

    /** One row's parameters; the defaults are the spec's no-ops apart from temperature 1. */
    private record Row(float temperature, int topK, float topP, float minP, float penalty, int topPFirst,
                       int minKeep, int maskStop) {
        static Row plain() {
            return new Row(1f, 0, 1f, 0f, 1f, 0, 1, 0);
        }

        Row withTemperature(float t) {
            return new Row(t, topK, topP, minP, penalty, topPFirst, minKeep, maskStop);
        }

        Row withTopK(int k) {
            return new Row(temperature, k, topP, minP, penalty, topPFirst, minKeep, maskStop);
        }

        Row withTopP(float p, int keep) {
            return new Row(temperature, topK, p, minP, penalty, topPFirst, keep, maskStop);
        }

        Row withMinP(float p) {
            return new Row(temperature, topK, topP, p, penalty, topPFirst, minKeep, maskStop);
        }

        Row withPenalty(float p) {
            return new Row(temperature, topK, topP, minP, p, topPFirst, minKeep, maskStop);
        }

        Row withTopPFirst() {
            return new Row(temperature, topK, topP, minP, penalty, 1, minKeep, maskStop);
        }

        Row withMaskStop() {
            return new Row(temperature, topK, topP, minP, penalty, topPFirst, minKeep, 1);
        }
    }

    /** Run samplingProbs over {@code rows}, each row reading its own logits row. */
    private static float[] probs(float[] logits, List<Row> rows, float[] counts, int[] stopIds, boolean applyFilters) {
        int n = rows.size();
        int vocab = logits.length / n;
        float[] t = new float[n];
        int[] k = new int[n];
        float[] p = new float[n];
        float[] minP = new float[n];
        float[] pen = new float[n];
        int[] first = new int[n];
        int[] keep = new int[n];
        int[] mask = new int[n];
        for (int r = 0; r < n; r++) {
            Row row = rows.get(r);
            t[r] = row.temperature();
            k[r] = row.topK();
            p[r] = row.topP();
            minP[r] = row.minP();
            pen[r] = row.penalty();
            first[r] = row.topPFirst();
            keep[r] = row.minKeep();
            mask[r] = row.maskStop();
        }
        SamplingBatch batch = new SamplingBatch(n, DEVICE.fromFloats(t, DType.F32, n), DEVICE.fromInts(k, n),
                DEVICE.fromFloats(p, DType.F32, n), DEVICE.fromFloats(minP, DType.F32, n), DEVICE.fromFloats(pen, DType.F32, n),
                counts == null ? null : DEVICE.fromFloats(counts, DType.F32, n, vocab), DEVICE.fromInts(first, n),
                DEVICE.fromInts(keep, n), DEVICE.fromInts(mask, n),
                stopIds == null ? null : DEVICE.fromInts(stopIds, stopIds.length), applyFilters);
        CpuTensor out = DEVICE.allocate(DType.F32, n, vocab);
        DEVICE.ops().samplingProbs(DEVICE.fromFloats(logits, DType.F32, n, vocab), batch, out);
        return DEVICE.toFloats(out);
    }

    private static float[] probs(float[] logits, Row row) {
        return probs(logits, List.of(row), null, null, true);
    }

    /** Logits whose softmax at temperature 1 is {@code p} (zero-probability entries excluded by callers). */
    private static float[] logitsOf(double... p) {
        float[] l = new float[p.length];
        for (int i = 0; i < p.length; i++) {
            l[i] = (float) Math.log(p[i]);
        }
        return l;
    }

    private static double[] softmax(double[] l, double temperature) {
        double max = Double.NEGATIVE_INFINITY;
        for (double x : l) {
            max = Math.max(max, x / temperature);
        }
        double sum = 0;
        double[] e = new double[l.length];
        for (int i = 0; i < l.length; i++) {
            e[i] = Math.exp(l[i] / temperature - max);
            sum += e[i];
        }
        for (int i = 0; i < l.length; i++) {
            e[i] /= sum;
        }
        return e;
    }

    /** Zeros exactly where expected, every other entry within 1e-5 relative. */
    private static void assertProbs(double[] expected, float[] actual) {
        assertThat(actual).hasSize(expected.length);
        for (int i = 0; i < expected.length; i++) {
            if (expected[i] == 0) {
                assertThat(actual[i]).as("entry %d", i).isZero();
            } else {
                assertThat((double) actual[i]).as("entry %d", i)
                        .isCloseTo(expected[i], offset(1e-5 * expected[i]));
            }
        }
    }

    @Test
    void softmaxOfLogitsOverTemperature() {
        Random rnd = new Random(1);
        int vocab = 1000;
        float[] logits = randomFloats(rnd, 2 * vocab, 3.0);
        float[] got = probs(logits, List.of(Row.plain().withTemperature(0.7f), Row.plain().withTemperature(1.3f)), null, null, true);
        for (int r = 0; r < 2; r++) {
            double[] l = new double[vocab];
            for (int i = 0; i < vocab; i++) {
                l[i] = logits[r * vocab + i];
            }
            float[] row = new float[vocab];
            System.arraycopy(got, r * vocab, row, 0, vocab);
            assertProbs(softmax(l, r == 0 ? 0.7f : 1.3f), row);
        }
    }

    @Test
    void disabledFiltersLeaveTheSoftmaxBitForBit() {
        Random rnd = new Random(2);
        int vocab = 500;
        float[] logits = randomFloats(rnd, vocab, 2.0);
        float[] plain = probs(logits, Row.plain());
        assertThat(probs(logits, Row.plain().withTopK(vocab))).isEqualTo(plain);
        assertThat(probs(logits, Row.plain().withTopK(vocab + 7).withTopPFirst())).isEqualTo(plain);
        assertThat(probs(logits, Row.plain().withTopP(1f, 1).withTopPFirst())).isEqualTo(plain);
        assertThat(probs(logits, Row.plain().withPenalty(1f))).isEqualTo(plain);
        // applyFilters = false skips top-k/top-p whatever the row asks
        assertThat(probs(logits, List.of(Row.plain().withTopK(3).withTopP(0.2f, 1)), null, null, false)).isEqualTo(plain);
        // a penalty of 1 with counts is the identity
        float[] counts = new float[vocab];
        for (int i = 0; i < vocab; i += 3) {
            counts[i] = 1 + i % 4;
        }
        assertThat(probs(logits, List.of(Row.plain()), counts, null, true)).isEqualTo(plain);
    }

    @Test
    void temperatureZeroIsOneHotAtTheArgmaxAfterThePenalty() {
        float[] logits = {2.0f, 1.9f, -1f, 1.0f, 1.9f};
        assertProbs(new double[] {1, 0, 0, 0, 0}, probs(logits, Row.plain().withTemperature(0f)));
        // the penalty demotes token 0 (2.0 / 1.2 < 1.9); tokens 1 and 4 tie and the lower index wins
        float[] counts = {1, 0, 0, 0, 0};
        float[] got = probs(logits, List.of(Row.plain().withTemperature(0f).withPenalty(1.2f)), counts, null, true);
        assertProbs(new double[] {0, 1, 0, 0, 0}, got);
        // filters and min-p leave a one-hot alone
        Row filtered = Row.plain().withTemperature(0f).withTopK(2).withTopP(0.3f, 1).withMinP(0.9f);
        assertProbs(new double[] {1, 0, 0, 0, 0}, probs(logits, filtered));
        assertProbs(new double[] {1, 0, 0, 0, 0}, probs(logits, filtered.withTopPFirst()));
    }

    @Test
    void repetitionPenaltyIsSignAwareAndRaisedToTheCount() {
        float[] logits = {2f, -1f, 3f, 0.5f, -2f, 0f};
        float[] counts = {1, 2, 0, 3, 0, 2};
        float p = 1.5f;
        double[] penalised = {2 / 1.5, -1 * 1.5 * 1.5, 3, 0.5 / (1.5 * 1.5 * 1.5), -2, 0};
        float[] got = probs(logits, List.of(Row.plain().withPenalty(p).withTemperature(0.8f)), counts, null, true);
        assertProbs(softmax(penalised, 0.8f), got);
    }

    @Test
    void minPDropsTokensBelowAFractionOfTheMaxAndRenormalises() {
        float[] logits = logitsOf(0.5, 0.3, 0.15, 0.05);
        assertProbs(new double[] {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, probs(logits, Row.plain().withMinP(0.2f)));
        // min-p 1 keeps only the argmax, and every token tied with it
        assertProbs(new double[] {1, 0, 0, 0}, probs(logits, Row.plain().withMinP(1f)));
        assertProbs(new double[] {0.5, 0.5, 0}, probs(logitsOf(0.4, 0.4, 0.2), Row.plain().withMinP(1f)));
    }

    @Test
    void topKKeepsTheKMostLikelyTiesByLowerIndex() {
        assertProbs(new double[] {0, 4.0 / 7, 0, 3.0 / 7}, probs(logitsOf(0.1, 0.4, 0.2, 0.3), Row.plain().withTopK(2)));
        assertProbs(new double[] {0.5, 0.5, 0, 0}, probs(logitsOf(0.3, 0.3, 0.3, 0.1), Row.plain().withTopK(2)));
        assertProbs(new double[] {0, 1, 0, 0}, probs(logitsOf(0.1, 0.4, 0.2, 0.3), Row.plain().withTopK(1)));
    }

    @Test
    void topPKeepsTheSmallestPrefixReachingPAndAtLeastMinKeep() {
        float[] logits = logitsOf(0.15, 0.5, 0.05, 0.3);
        assertProbs(new double[] {0, 0.625, 0, 0.375}, probs(logits, Row.plain().withTopP(0.75f, 1)));
        assertProbs(new double[] {0, 1, 0, 0}, probs(logits, Row.plain().withTopP(0.4f, 1)));
        assertProbs(new double[] {0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95}, probs(logits, Row.plain().withTopP(0.4f, 3)));
        assertProbs(new double[] {0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95}, probs(logits, Row.plain().withTopP(0.9f, 1)));
    }

    /**
     * {@code [0.5, 0.2, 0.2, 0.1]}, top-k 2, top-p 0.65. FlashInfer order: top-k keeps tokens 0 and 1,
     * renormalised to 5/7 and 2/7, and 5/7 alone reaches 0.65. Hugging Face order: top-p on the full
     * distribution needs 0.5 + 0.2, top-k keeps the same two: 5/7 and 2/7 survive.
     */
    @Test
    void theTwoFilterOrdersDiffer() {
        float[] logits = logitsOf(0.5, 0.2, 0.2, 0.1);
        Row row = Row.plain().withTopK(2).withTopP(0.65f, 1);
        assertProbs(new double[] {1, 0, 0, 0}, probs(logits, row));
        assertProbs(new double[] {5.0 / 7, 2.0 / 7, 0, 0}, probs(logits, row.withTopPFirst()));
        // with top-k wider than the top-p set the orders agree on what survives
        Row wide = Row.plain().withTopK(3).withTopP(0.6f, 1);
        assertProbs(new double[] {5.0 / 7, 2.0 / 7, 0, 0}, probs(logits, wide));
        assertProbs(new double[] {5.0 / 7, 2.0 / 7, 0, 0}, probs(logits, wide.withTopPFirst()));
    }

    @Test
    void stopIdsAreZeroedWithoutRenormalising() {
        Random rnd = new Random(3);
        int vocab = 50;
        float[] logits = randomFloats(rnd, 2 * vocab, 1.0);
        int[] stops = {3, 49, 17};
        float[] got = probs(logits, List.of(Row.plain().withMaskStop(), Row.plain()), null, stops, true);
        float[] rowLogits = new float[vocab];
        for (int r = 0; r < 2; r++) {
            System.arraycopy(logits, r * vocab, rowLogits, 0, vocab);
            float[] plain = probs(rowLogits, Row.plain());
            for (int i = 0; i < vocab; i++) {
                boolean masked = r == 0 && (i == 3 || i == 49 || i == 17);
                assertThat(got[r * vocab + i]).isEqualTo(masked ? 0f : plain[i]);
            }
        }
    }

    @Test
    void greedyRowWithHeldBackStopIdsTakesTheBestOtherToken() {
        float[] logits = {0.1f, 3.0f, 2.0f, 0.5f};
        int[] stops = {1};
        float[] held = probs(logits, List.of(Row.plain().withTemperature(0f).withMaskStop()), null, stops, true);
        assertThat(held).containsExactly(0f, 0f, 1f, 0f);
        float[] free = probs(logits, List.of(Row.plain().withTemperature(0f)), null, stops, true);
        assertThat(free).containsExactly(0f, 1f, 0f, 0f);
    }

    @Test
    void rowsOfABatchAreIndependent() {
        Random rnd = new Random(4);
        int vocab = 5000;
        List<Row> rows = List.of(Row.plain().withTemperature(0.6f).withTopK(40).withTopP(0.9f, 1), Row.plain().withTemperature(0f),
                Row.plain().withMinP(0.05f).withTopP(0.8f, 5).withTopPFirst().withTopK(100), Row.plain().withTemperature(1.7f).withPenalty(1.3f),
                Row.plain().withMaskStop().withTopK(7));
        float[] logits = randomFloats(rnd, rows.size() * vocab, 2.5);
        float[] counts = new float[rows.size() * vocab];
        for (int i = 0; i < counts.length; i += 11) {
            counts[i] = 1 + i % 3;
        }
        int[] stops = {1, 2, 3};
        float[] batch = probs(logits, rows, counts, stops, true);
        for (int r = 0; r < rows.size(); r++) {
            float[] l = new float[vocab];
            float[] c = new float[vocab];
            System.arraycopy(logits, r * vocab, l, 0, vocab);
            System.arraycopy(counts, r * vocab, c, 0, vocab);
            float[] alone = probs(l, List.of(rows.get(r)), c, stops, true);
            for (int i = 0; i < vocab; i++) {
                assertThat(batch[r * vocab + i]).isEqualTo(alone[i]);
            }
        }
    }

    private static int[] sample(float[][] dists, long[] seeds, long[] offsets) {
        int vocab = dists[0].length;
        float[] flat = new float[dists.length * vocab];
        for (int r = 0; r < dists.length; r++) {
            System.arraycopy(dists[r], 0, flat, r * vocab, vocab);
        }
        CpuTensor out = DEVICE.allocate(DType.I32, dists.length);
        DEVICE.ops().sampleFromProbs(DEVICE.fromFloats(flat, DType.F32, dists.length, vocab),
                DEVICE.fromLongs(seeds, seeds.length), DEVICE.fromLongs(offsets, offsets.length), out);
        return DEVICE.toInts(out);
    }

    /** The token depends on (probs, seed, offset) only: not on the row's position or its batch mates. */
    @Test
    void sampleFromProbsIsDeterministicPerSeedAndOffset() {
        Random rnd = new Random(5);
        int vocab = 300;
        int rows = 60;
        float[][] dists = new float[rows][vocab];
        long[] seeds = new long[rows];
        long[] offsets = new long[rows];
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < vocab; i++) {
                dists[r][i] = rnd.nextInt(4) == 0 ? rnd.nextFloat() : 0f;
            }
            seeds[r] = r % 3 == 0 ? rnd.nextLong() : rnd.nextInt(1000);
            offsets[r] = rnd.nextInt(5000) + (r % 5 == 0 ? 1L << 33 : 0);
        }
        int[] first = sample(dists, seeds, offsets);

        // reversed, with an unrelated row in front
        float[][] d2 = new float[rows + 1][];
        long[] s2 = new long[rows + 1];
        long[] o2 = new long[rows + 1];
        d2[0] = dists[7];
        s2[0] = 99;
        o2[0] = 1;
        for (int r = 0; r < rows; r++) {
            d2[rows - r] = dists[r];
            s2[rows - r] = seeds[r];
            o2[rows - r] = offsets[r];
        }
        int[] second = sample(d2, s2, o2);
        List<Integer> distinct = new ArrayList<>();
        for (int r = 0; r < rows; r++) {
            assertThat(second[rows - r]).isEqualTo(first[r]);
            float u = Philox.uniform(seeds[r], offsets[r]);
            assertThat(first[r]).isEqualTo(ProbabilitySampler.sample(dists[r], 0, vocab, u));
            assertThat(dists[r][first[r]]).isPositive();
            if (!distinct.contains(first[r])) {
                distinct.add(first[r]);
            }
        }
        assertThat(distinct.size()).isGreaterThan(rows / 2);
        // the next offset of the same request generally draws a different number
        long[] next = offsets.clone();
        for (int r = 0; r < rows; r++) {
            next[r]++;
        }
        assertThat(sample(dists, seeds, next)).isNotEqualTo(first);
    }
}
