package org.mstar.device.cuda.harness;

import static org.mstar.device.cuda.harness.Twin.relErr;
import static org.mstar.device.cuda.harness.Twin.tolerance;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.Mamba2Shape;
import org.mstar.device.cuda.harness.Twin.Pair;

/**
 * The Mamba2 ops ({@link org.mstar.device.StateSpaceOps}) on the GPU against the CPU, at a Bamba-9B mixer's geometry
 * (128 heads of 64 channels, one group, state 128, conv 4, chunks of 256): the causal conv1d, the chunked scan and
 * the gated norm at decode (1 and 64 rows) and prefill (one 512-token prompt, and a mixed step of prompt chunks and
 * decode rows) shapes, each continuing from random stored states; the decode step at 1 and 64 rows. Outputs and the
 * states the ops leave are both compared. Inputs are drawn as a checkpoint's are: A from 1 to 16, step sizes from
 * 0.001 to 0.1. The scan also at states of 64 and 256 (its other two instantiations), the step at 256.
 */
final class StateSpaceChecks {
    private static final Mamba2Shape BAMBA_9B = new Mamba2Shape(128, 64, 1, 128, 4, 256, 0f, Float.POSITIVE_INFINITY);
    /** Mixers of states 64 (two groups) and 256 (transformers' BambaConfig default), heads of 80 (two channel tiles). */
    private static final Mamba2Shape STATE_64 = new Mamba2Shape(16, 80, 2, 64, 4, 256, 0f, Float.POSITIVE_INFINITY);
    private static final Mamba2Shape STATE_256 = new Mamba2Shape(16, 64, 1, 256, 4, 256, 0f, Float.POSITIVE_INFINITY);

    private final Twin tw;
    private final List<CheckResult> results = new ArrayList<>();

    StateSpaceChecks(Twin twin) {
        this.tw = twin;
    }

    List<CheckResult> run() {
        for (DType dt : List.of(DType.F32, DType.BF16)) {
            for (int[] lengths : new int[][] {{1}, ones(64), {512}, {200, 1, 1, 37, 1, 130}, {1000, 1, 700}}) {
                String name = lengths.length + " segments of " + sum(lengths) + " tokens";
                CheckResult.attempt(results, "causalConv1d " + name, () -> conv(dt, lengths));
                CheckResult.attempt(results, "ssdScan " + name, () -> scan(BAMBA_9B, dt, lengths, false));
                CheckResult.attempt(results, "gatedRmsNorm " + name, () -> norm(dt, sum(lengths)));
            }
            for (int rows : new int[] {1, 64}) {
                CheckResult.attempt(results, "ssmStep " + rows, () -> scan(BAMBA_9B, dt, ones(rows), true));
            }
            for (Mamba2Shape other : List.of(STATE_64, STATE_256)) {
                String state = "state " + other.stateDim();
                CheckResult.attempt(results, "ssdScan " + state, () -> scan(other, dt, new int[] {300, 1, 45}, false));
                CheckResult.attempt(results, "ssmStep " + state, () -> scan(other, dt, ones(3), true));
            }
        }
        return results;
    }

    private static int[] ones(int n) {
        int[] v = new int[n];
        Arrays.fill(v, 1);
        return v;
    }

    private static int sum(int[] v) {
        return Arrays.stream(v).sum();
    }

    /** Segment starts and, for a pool one larger than the segments, their slots in reverse (slot 0 left unnamed). */
    private Pair[] segments(int[] lengths) {
        int[] starts = new int[lengths.length + 1];
        int[] slots = new int[lengths.length];
        for (int i = 0; i < lengths.length; i++) {
            starts[i + 1] = starts[i] + lengths[i];
            slots[i] = lengths.length - i;
        }
        return new Pair[] {tw.ints(slots, slots.length), tw.ints(starts, starts.length)};
    }

    private void conv(DType dt, int[] lengths) {
        Mamba2Shape s = BAMBA_9B;
        int tokens = sum(lengths);
        Pair[] seg = segments(lengths);
        Pair proj = tw.floats(tw.randomFloats(tokens * s.projWidth(), 1f, dt), dt, tokens, s.projWidth());
        Pair w = tw.floats(tw.randomFloats(s.convDim() * s.convKernel(), 0.5f, dt), dt, s.convDim(), s.convKernel());
        Pair b = tw.floats(tw.randomFloats(s.convDim(), 0.5f, dt), dt, s.convDim());
        int slots = lengths.length + 1;
        Pair states = tw.floats(tw.randomFloats(slots * s.convDim() * (s.convKernel() - 1), 1f, DType.F32), DType.F32,
                slots, s.convDim(), s.convKernel() - 1);
        Pair out = tw.poisoned(dt, tokens, s.convDim());
        tw.cpu.ops().causalConv1d(proj.cpu(), w.cpu(), b.cpu(), states.cpu(), seg[0].cpu(), seg[1].cpu(), s, out.cpu());
        Runnable gpu = () -> tw.gpu.ops().causalConv1d(proj.gpu(), w.gpu(), b.gpu(), states.gpu(), seg[0].gpu(),
                seg[1].gpu(), s, out.gpu());
        record("causalConv1d", lengths, dt, gpu, out, states);
        close(proj, w, b, states, out, seg[0], seg[1]);
    }

    private void scan(Mamba2Shape s, DType dt, int[] lengths, boolean step) {
        int tokens = sum(lengths);
        Pair[] seg = segments(lengths);
        Pair xbc = tw.floats(tw.randomFloats(tokens * s.convDim(), 1f, dt), dt, tokens, s.convDim());
        Pair proj = tw.floats(tw.randomFloats(tokens * s.projWidth(), 1f, dt), dt, tokens, s.projWidth());
        float[] aLog = new float[s.heads()];
        float[] dtBias = new float[s.heads()];
        for (int h = 0; h < s.heads(); h++) {
            aLog[h] = (float) Math.log(1 + 15.0 * h / s.heads());
            double stepSize = Math.exp(Math.log(0.001) + (Math.log(0.1) - Math.log(0.001)) * tw.rnd.nextDouble());
            dtBias[h] = (float) (stepSize + Math.log(-Math.expm1(-stepSize))); // softplus⁻¹
        }
        Pair a = tw.floats(aLog, DType.F32, s.heads());
        Pair bias = tw.floats(dtBias, DType.F32, s.heads());
        Pair d = tw.floats(tw.randomFloats(s.heads(), 1f, DType.F32), DType.F32, s.heads());
        int slots = lengths.length + 1;
        int stateSize = s.heads() * s.headDim() * s.stateDim();
        Pair states = tw.floats(tw.randomFloats(slots * stateSize, 1f, DType.F32), DType.F32, slots, s.heads(),
                s.headDim(), s.stateDim());
        Pair y = tw.poisoned(dt, tokens, s.inner());
        Runnable gpu;
        if (step) {
            tw.cpu.ops().ssmStep(xbc.cpu(), proj.cpu(), a.cpu(), bias.cpu(), d.cpu(), states.cpu(), seg[0].cpu(), s,
                    y.cpu());
            gpu = () -> tw.gpu.ops().ssmStep(xbc.gpu(), proj.gpu(), a.gpu(), bias.gpu(), d.gpu(), states.gpu(),
                    seg[0].gpu(), s, y.gpu());
        } else {
            tw.cpu.ops().ssdScan(xbc.cpu(), proj.cpu(), a.cpu(), bias.cpu(), d.cpu(), states.cpu(), seg[0].cpu(),
                    seg[1].cpu(), s, y.cpu());
            gpu = () -> tw.gpu.ops().ssdScan(xbc.gpu(), proj.gpu(), a.gpu(), bias.gpu(), d.gpu(), states.gpu(),
                    seg[0].gpu(), seg[1].gpu(), s, y.gpu());
        }
        record((step ? "ssmStep" : "ssdScan") + (s == BAMBA_9B ? "" : " state " + s.stateDim()), lengths, dt, gpu, y,
                states);
        close(xbc, proj, a, bias, d, states, y, seg[0], seg[1]);
    }

    private void norm(DType dt, int rows) {
        Mamba2Shape s = BAMBA_9B;
        Pair y = tw.floats(tw.randomFloats(rows * s.inner(), 1f, dt), dt, rows, s.inner());
        Pair proj = tw.floats(tw.randomFloats(rows * s.projWidth(), 2f, dt), dt, rows, s.projWidth());
        Pair w = tw.floats(tw.randomFloats(s.inner(), 1f, dt), dt, s.inner());
        Pair out = tw.poisoned(dt, rows, s.inner());
        tw.cpu.ops().gatedRmsNorm(y.cpu(), proj.cpu(), w.cpu(), s.groups(), 1e-5f, out.cpu());
        Runnable gpu = () -> tw.gpu.ops().gatedRmsNorm(y.gpu(), proj.gpu(), w.gpu(), s.groups(), 1e-5f, out.gpu());
        gpu.run();
        results.add(new CheckResult("gatedRmsNorm", Twin.shape(rows, s.inner()), dt.toString(),
                relErr(tw.cpu.toFloats(out.cpu()), tw.gpu.toFloats(out.gpu())), tolerance(dt), tw.median(gpu), "cpu"));
        close(y, proj, w, out);
    }

    /** Runs the GPU op once, compares its output and the states it left, then times further runs. */
    private void record(String op, int[] lengths, DType dt, Runnable gpu, Pair out, Pair states) {
        gpu.run();
        double outErr = relErr(tw.cpu.toFloats(out.cpu()), tw.gpu.toFloats(out.gpu()));
        double stateErr = relErr(tw.cpu.toFloats(states.cpu()), tw.gpu.toFloats(states.gpu()));
        double ms = tw.median(gpu);
        String shape = lengths.length + " segments, " + sum(lengths) + " tokens";
        results.add(new CheckResult(op, shape, dt.toString(), outErr, tolerance(dt), ms, "cpu"));
        results.add(new CheckResult(op + " (states)", shape, "F32", stateErr, tolerance(DType.F32), ms, "cpu"));
    }

    private static void close(Pair... pairs) {
        for (Pair p : pairs) {
            p.cpu().close();
            p.gpu().close();
        }
    }
}
