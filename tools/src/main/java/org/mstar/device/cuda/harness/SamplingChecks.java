package org.mstar.device.cuda.harness;

import static org.mstar.device.cuda.harness.Twin.relErr;
import static org.mstar.device.cuda.harness.Twin.shape;

import java.util.ArrayList;
import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.SamplingBatch;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.harness.Twin.Pair;

/**
 * The sampling pipeline: samplingProbs over rows that exercise every step (penalty, greedy, min-p, top-k,
 * top-p in both orders, min-keep, stop ids), and sampleFromProbs, whose tokens must equal the CPU's bit
 * for bit given the same probabilities; maskLogits (structured output), whose masked logits must equal the CPU's
 * bit for bit.
 */
final class SamplingChecks {
    /** One row's sampling parameters, as SamplingBatch holds them. */
    private record SamplingRow(float temperature, int topK, float topP, float minP, float penalty, int topPFirst,
                               int minKeep, boolean maskStops) {}

    private static final SamplingRow[] ROWS = {
        new SamplingRow(1f, 0, 1f, 0f, 1f, 0, 1, false),
        new SamplingRow(0.7f, 50, 1f, 0f, 1f, 0, 1, false),
        new SamplingRow(1.3f, 0, 0.9f, 0f, 1f, 0, 1, false),
        new SamplingRow(0.8f, 100, 0.8f, 0f, 1f, 0, 1, false),
        new SamplingRow(1f, 40, 0.5f, 0f, 1f, 1, 3, false),
        new SamplingRow(0f, 0, 1f, 0f, 1.5f, 0, 1, true),
        new SamplingRow(1f, 0, 1f, 0.05f, 1.3f, 0, 1, false),
        new SamplingRow(1f, 0, 0.95f, 0f, 1f, 0, 1, true),
        new SamplingRow(0.5f, 1, 1f, 0f, 1f, 0, 1, false),
        new SamplingRow(2f, 0, 0.3f, 0f, 1f, 1, 20, false),
    };
    private static final int[] STOP_IDS = {2, 7, 31999};

    private final Twin tw;
    private final List<CheckResult> results = new ArrayList<>();

    SamplingChecks(Twin twin) {
        this.tw = twin;
    }

    List<CheckResult> run() {
        CheckResult.attempt(results, "samplingProbs 32000", () -> samplingProbs(32_000));
        CheckResult.attempt(results, "samplingProbs 128256", () -> samplingProbs(128_256));
        CheckResult.attempt(results, "sampleFromProbs 50000", () -> sampleFromProbs(200, 50_000));
        CheckResult.attempt(results, "sampleFromProbs 1000", () -> sampleFromProbs(17, 1000));
        CheckResult.attempt(results, "maskLogits 128256", () -> maskLogits(64, 128_256));
        CheckResult.attempt(results, "maskLogits 1017", () -> maskLogits(5, 1017));
        return results;
    }

    private SamplingBatch batch(Device d, float[] counts, int vocab, List<Tensor> owned) {
        int rows = ROWS.length;
        float[] temp = new float[rows];
        int[] topK = new int[rows];
        float[] topP = new float[rows];
        float[] minP = new float[rows];
        float[] pen = new float[rows];
        int[] first = new int[rows];
        int[] keep = new int[rows];
        int[] mask = new int[rows];
        for (int r = 0; r < rows; r++) {
            temp[r] = ROWS[r].temperature();
            topK[r] = ROWS[r].topK();
            topP[r] = ROWS[r].topP();
            minP[r] = ROWS[r].minP();
            pen[r] = ROWS[r].penalty();
            first[r] = ROWS[r].topPFirst();
            keep[r] = ROWS[r].minKeep();
            mask[r] = ROWS[r].maskStops() ? 1 : 0;
        }
        int[] stops = STOP_IDS.clone();
        stops[2] = vocab - 1;
        return new SamplingBatch(rows, own(owned, d.fromFloats(temp, DType.F32, rows)), own(owned, d.fromInts(topK, rows)),
                own(owned, d.fromFloats(topP, DType.F32, rows)), own(owned, d.fromFloats(minP, DType.F32, rows)),
                own(owned, d.fromFloats(pen, DType.F32, rows)), own(owned, d.fromFloats(counts, DType.F32, rows, vocab)),
                own(owned, d.fromInts(first, rows)), own(owned, d.fromInts(keep, rows)), own(owned, d.fromInts(mask, rows)),
                own(owned, d.fromInts(stops, stops.length)), true);
    }

    private static Tensor own(List<Tensor> owned, Tensor t) {
        owned.add(t);
        return t;
    }

    private void samplingProbs(int vocab) {
        int rows = ROWS.length;
        float[] logits = tw.randomFloats(rows * vocab, 8f, DType.F32);
        float[] counts = new float[rows * vocab];
        for (int i = 0; i < counts.length; i++) {
            counts[i] = tw.rnd.nextInt(20) == 0 ? 1f : 0f;
        }
        List<Tensor> owned = new ArrayList<>();
        SamplingBatch gpuBatch = batch(tw.gpu, counts, vocab, owned);
        SamplingBatch cpuBatch = batch(tw.cpu, counts, vocab, owned);
        Pair l = tw.floats(logits, DType.F32, rows, vocab);
        Pair probs = tw.poisoned(DType.F32, rows, vocab);
        tw.cpu.ops().samplingProbs(l.cpu(), cpuBatch, probs.cpu());
        float[] expected = tw.cpu.toFloats(probs.cpu());
        Runnable gpuOp = () -> tw.gpu.ops().samplingProbs(l.gpu(), gpuBatch, probs.gpu());
        gpuOp.run();
        float[] got = tw.gpu.toFloats(probs.gpu());
        double ms = tw.median(gpuOp);
        results.add(new CheckResult("samplingProbs (all rows)", shape(rows, vocab), "F32", relErr(expected, got), 1e-5,
                ms, "cpu"));
        int keptDiffer = 0;
        for (int i = 0; i < got.length; i++) {
            if ((got[i] > 0) != (expected[i] > 0)) {
                keptDiffer++;
            }
        }
        results.add(new CheckResult("samplingProbs (kept-set differences)", shape(rows, vocab), "F32", keptDiffer, 0, ms,
                "cpu"));
        owned.forEach(Tensor::close);
    }

    /** Random distributions with zero runs, a one-hot row, an all-zero row; tokens must match exactly. */
    private void sampleFromProbs(int rows, int vocab) {
        float[] probs = new float[rows * vocab];
        for (int r = 0; r < rows; r++) {
            for (int v = 0; v < vocab; v++) {
                float x = tw.rnd.nextFloat();
                probs[r * vocab + v] = tw.rnd.nextInt(4) == 0 ? 0f : x * x * x;
            }
        }
        java.util.Arrays.fill(probs, 0, vocab, 0f); // row 0: nothing to draw
        java.util.Arrays.fill(probs, vocab, 2 * vocab, 0f);
        probs[vocab + vocab / 2] = 1f; // row 1: one-hot
        java.util.Arrays.fill(probs, 3 * vocab - 300, 3 * vocab, 0f); // row 2: zero tail past a block edge
        long[] seeds = new long[rows];
        long[] offsets = new long[rows];
        for (int r = 0; r < rows; r++) {
            seeds[r] = tw.rnd.nextLong();
            offsets[r] = r % 3 == 0 ? tw.rnd.nextInt(4096) : tw.rnd.nextLong() >>> 1;
        }
        Pair p = tw.floats(probs, DType.F32, rows, vocab);
        Pair s = tw.longs(seeds, rows);
        Pair o = tw.longs(offsets, rows);
        Pair out = tw.poisoned(DType.I32, rows);
        tw.cpu.ops().sampleFromProbs(p.cpu(), s.cpu(), o.cpu(), out.cpu());
        Runnable gpuOp = () -> tw.gpu.ops().sampleFromProbs(p.gpu(), s.gpu(), o.gpu(), out.gpu());
        gpuOp.run();
        double bad = Twin.mismatches(tw.cpu.toInts(out.cpu()), tw.gpu.toInts(out.gpu()));
        results.add(new CheckResult("sampleFromProbs (tokens differing)", shape(rows, vocab), "I32", bad, 0,
                tw.median(gpuOp), "cpu"));
    }

    /**
     * Structured output's mask: random allowed bits (sparse and dense rows, one row allowing everything, bits past
     * the vocabulary set); every logit must equal the CPU's bit for bit, -inf included.
     */
    private void maskLogits(int rows, int vocab) {
        int words = (vocab + 31) / 32;
        float[] logits = tw.randomFloats(rows * vocab, 8f, DType.F32);
        int[] allowed = new int[rows * words];
        for (int r = 0; r < rows; r++) {
            int density = r % 4; // 0: all allowed, 1: about half, 2: a few, 3: most
            for (int w = 0; w < words; w++) {
                int bits = switch (density) {
                    case 0 -> -1;
                    case 1 -> tw.rnd.nextInt();
                    case 2 -> tw.rnd.nextInt(64) == 0 ? 1 << tw.rnd.nextInt(32) : 0;
                    default -> tw.rnd.nextInt() | tw.rnd.nextInt();
                };
                allowed[r * words + w] = bits;
            }
        }
        Pair l = tw.floats(logits, DType.F32, rows, vocab);
        Pair a = tw.ints(allowed, rows, words);
        tw.cpu.ops().maskLogits(l.cpu(), a.cpu());
        Runnable gpuOp = () -> tw.gpu.ops().maskLogits(l.gpu(), a.gpu());
        gpuOp.run();
        double differ = Twin.bitMismatches(tw.cpu.toFloats(l.cpu()), tw.gpu.toFloats(l.gpu()));
        // masking is idempotent, so timing repeats of the same call is fair
        results.add(new CheckResult("maskLogits (logits differing)", shape(rows, vocab), "F32", differ, 0,
                tw.median(gpuOp), "cpu"));
    }
}
