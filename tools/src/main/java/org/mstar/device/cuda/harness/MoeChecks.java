package org.mstar.device.cuda.harness;

import static org.mstar.device.cuda.harness.Twin.relErr;
import static org.mstar.device.cuda.harness.Twin.shape;
import static org.mstar.device.cuda.harness.Twin.tolerance;

import java.util.ArrayList;
import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.MoeRouting;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.harness.Twin.Pair;

/**
 * CUDA vs CPU for the mixture-of-experts ops: the router (Qwen3-MoE's softmax top-8 of 128 normalised, OLMoE's top-8
 * of 64 unnormalised, DeepSeek-V2's group-limited top-6 of 160 scaled by 16, and sigmoid scores), then the routed
 * experts at decode (1 and 64 rows) and prefill (512 rows) shapes of Qwen3-30B-A3B (128 experts, top 8, hidden
 * 2048, width 768) and DeepSeek-V2-Lite (64 experts, top 6, width 1408), and once as a device of expert parallelism
 * holding the second half of the experts sees them ({@code moeLocalIds}, then the experts over its half). The experts run on the same ids and weights
 * on both devices (routed once on the CPU), so a near tie in the router cannot make their outputs differ. Each op runs
 * once on poisoned outputs and is compared, then timed (the times are not a performance measurement: the grouped GEMMs
 * run on the CUDA cores).
 */
final class MoeChecks {
    private final Twin tw;
    private final List<CheckResult> results = new ArrayList<>();

    MoeChecks(Twin twin) {
        this.tw = twin;
    }

    List<CheckResult> run() {
        MoeRouting qwen3 = MoeRouting.softmaxTopK(8, true);
        for (int rows : new int[] {1, 64, 512}) {
            attempt("moeRoute", () -> route(rows, 128, qwen3, "qwen3_moe"));
        }
        attempt("moeRoute", () -> route(64, 64, MoeRouting.softmaxTopK(8, false), "olmoe"));
        attempt("moeRoute", () -> route(64, 160, new MoeRouting(MoeRouting.Scoring.SOFTMAX, 6, false, 8, 3, 16f),
                "group-limited"));
        attempt("moeRoute", () -> route(64, 256, new MoeRouting(MoeRouting.Scoring.SIGMOID, 8, true, 8, 4, 2.5f),
                "sigmoid"));
        attempt("moeExperts", () -> experts(DType.BF16, new int[] {1, 64, 512}, 128, 2048, 768, qwen3));
        attempt("moeExperts", () -> experts(DType.BF16, new int[] {1, 64}, 64, 2048, 1408,
                new MoeRouting(MoeRouting.Scoring.SOFTMAX, 6, false, 1, 1, 1f)));
        attempt("moeExperts", () -> experts(DType.F32, new int[] {33}, 16, 520, 200, MoeRouting.softmaxTopK(4, false)));
        return results;
    }

    private void attempt(String name, Runnable check) {
        CheckResult.attempt(results, name, check);
    }

    private void route(int rows, int experts, MoeRouting routing, String what) {
        int k = routing.topK();
        Pair logits = tw.floats(tw.randomFloats(rows * experts, 4f, DType.F32), DType.F32, rows, experts);
        Pair ids = tw.poisoned(DType.I32, rows, k);
        Pair weights = tw.poisoned(DType.F32, rows, k);
        tw.cpu.ops().moeRoute(logits.cpu(), routing, ids.cpu(), weights.cpu());
        Runnable gpuOp = () -> tw.gpu.ops().moeRoute(logits.gpu(), routing, ids.gpu(), weights.gpu());
        gpuOp.run();
        double wrong = Twin.mismatches(tw.cpu.toInts(ids.cpu()), tw.gpu.toInts(ids.gpu()));
        double weightErr = relErr(tw.cpu.toFloats(weights.cpu()), tw.gpu.toFloats(weights.gpu()));
        double ms = tw.median(gpuOp);
        String s = shape(rows, experts) + " " + what + " top" + k;
        results.add(new CheckResult("moeRoute ids", s, "I32", wrong, 0, ms, "cpu"));
        results.add(new CheckResult("moeRoute weights", s, "F32", weightErr, tolerance(DType.F32), ms, "cpu"));
    }

    /** Each of {@code rowCounts} rows through the same {@code experts} experts, routed on the CPU from random logits. */
    private void experts(DType dt, int[] rowCounts, int experts, int hidden, int inter, MoeRouting routing) {
        Pair gateUp = tw.floats(tw.randomFloats(experts * 2 * inter * hidden, 0.05f, dt), dt, experts, 2L * inter,
                hidden);
        Pair down = tw.floats(tw.randomFloats(experts * hidden * inter, 0.05f, dt), dt, experts, hidden, inter);
        try {
            for (int rows : rowCounts) {
                experts(dt, rows, gateUp, down, routing);
            }
            experts(dt, rowCounts[rowCounts.length - 1], gateUp, down, routing, true);
        } finally {
            // the expert stacks are the large ones: 1.2 GB on each device at Qwen3-30B-A3B's geometry
            close(gateUp, down);
        }
    }

    private void experts(DType dt, int rows, Pair gateUp, Pair down, MoeRouting routing) {
        experts(dt, rows, gateUp, down, routing, false);
    }

    /**
     * With {@code secondHalf}, as a device of expert parallelism holding the second half of the experts sees it: the
     * routed ids renumbered ({@code moeLocalIds}, -1 for the first half's) and the experts run over its half.
     */
    private void experts(DType dt, int rows, Pair gateUp, Pair down, MoeRouting routing, boolean secondHalf) {
        int experts = (int) gateUp.cpu().dim(0);
        int hidden = (int) down.cpu().dim(1);
        int inter = (int) down.cpu().dim(2);
        int k = routing.topK();
        Pair x = tw.floats(tw.randomFloats(rows * hidden, 1f, dt), dt, rows, hidden);
        try (Tensor logits = tw.cpu.fromFloats(tw.randomFloats(rows * experts, 4f, DType.F32), DType.F32, rows, experts);
             Tensor cpuIds = tw.cpu.allocate(DType.I32, rows, k);
             Tensor cpuWeights = tw.cpu.allocate(DType.F32, rows, k)) {
            tw.cpu.ops().moeRoute(logits, routing, cpuIds, cpuWeights);
            Pair ids = tw.ints(tw.cpu.toInts(cpuIds), rows, k);
            Pair weights = tw.floats(tw.cpu.toFloats(cpuWeights), DType.F32, rows, k);
            Pair out = tw.poisoned(dt, rows, hidden);
            Pair expertIds = ids;
            Pair gu = gateUp;
            Pair dn = down;
            String what = "moeExperts";
            if (secondHalf) {
                int half = experts / 2;
                expertIds = tw.poisoned(DType.I32, rows, k);
                tw.cpu.ops().moeLocalIds(ids.cpu(), half, half, expertIds.cpu());
                tw.gpu.ops().moeLocalIds(ids.gpu(), half, half, expertIds.gpu());
                results.add(new CheckResult("moeLocalIds", shape(rows, k) + " second half of " + experts, "I32",
                        Twin.mismatches(tw.cpu.toInts(expertIds.cpu()), tw.gpu.toInts(expertIds.gpu())), 0, 0, "cpu"));
                gu = new Pair(gateUp.cpu().rows(half, half), gateUp.gpu().rows(half, half));
                dn = new Pair(down.cpu().rows(half, half), down.gpu().rows(half, half));
                what = "moeExperts (expert parallel, second half)";
            }
            Pair e = expertIds;
            Pair g = gu;
            Pair d = dn;
            tw.cpu.ops().moeExperts(x.cpu(), g.cpu(), d.cpu(), e.cpu(), weights.cpu(), out.cpu());
            Runnable gpuOp = () -> tw.gpu.ops().moeExperts(x.gpu(), g.gpu(), d.gpu(), e.gpu(), weights.gpu(),
                    out.gpu());
            gpuOp.run();
            double err = relErr(tw.cpu.toFloats(out.cpu()), tw.gpu.toFloats(out.gpu()));
            results.add(new CheckResult(what, shape(rows, hidden) + " " + experts + "x" + inter + " top" + k,
                    dt.toString(), err, tolerance(dt), tw.median(gpuOp), "cpu"));
            close(x, ids, weights, out);
            if (secondHalf) {
                close(e);
            }
        }
    }

    private static void close(Pair... pairs) {
        for (Pair p : pairs) {
            p.cpu().close();
            p.gpu().close();
        }
    }
}
