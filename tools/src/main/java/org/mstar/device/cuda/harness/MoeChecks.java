package org.mstar.device.cuda.harness;

import static org.mstar.device.cuda.harness.Twin.relErr;
import static org.mstar.device.cuda.harness.Twin.shape;
import static org.mstar.device.cuda.harness.Twin.tolerance;

import java.util.ArrayList;
import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.DeviceGraph;
import org.mstar.device.MoeRouting;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.device.cuda.MoeTiles;
import org.mstar.device.cuda.harness.Twin.Pair;

/**
 * CUDA vs CPU for the mixture-of-experts ops: the router (Qwen3-MoE's softmax top-8 of 128 normalised, OLMoE's top-8
 * of 64 unnormalised, DeepSeek-V2's group-limited top-6 of 160 scaled by 16, and sigmoid scores), then the routed
 * experts at decode (1 and 64 rows) and prefill (512 and 2048 rows) shapes of Qwen3-30B-A3B (128 experts, top 8,
 * hidden 2048, width 768) and DeepSeek-V2-Lite (64 experts, top 6, width 1408), 64 rows over 16 experts of
 * Qwen3-30B-A3B's widths (32 assignments an expert), and once as a device of expert parallelism holding the second
 * half of the experts sees them ({@code moeLocalIds}, then the experts over its half). The experts run on the same ids
 * and weights on both devices (routed once on the CPU), so a near tie in the router cannot make their outputs differ.
 * The bf16 experts run each of CudaMoe's bf16 ways at every row count: the tensor-core tiles (a device whose
 * {@link org.mstar.device.KernelOptions#moeGemmExpertRows()} no row count reaches, with the warpgroup GEMM off; the
 * skinny tiles up to 16 assignments an expert on average, the grouped GEMM above, as each row's name says), the
 * warpgroup GEMM where it serves (above 64 assignments an expert), and the cuBLAS GEMMs (one from which every row
 * count takes them); fp32 runs the CUDA-core GEMMs. The tiles are also recorded into a CUDA graph at 64 rows (skinny)
 * and 512 rows (grouped) and replayed with another routing, which must give that routing's result (nothing about the
 * routing is fixed at capture). Each op runs once on poisoned outputs and is compared, then timed (the times are not
 * a performance measurement; {@code --moe-perf} has those).
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
        attempt("moeExperts", () -> experts(DType.BF16, new int[] {1, 64, 512, 2048}, 128, 2048, 768, qwen3,
                new int[] {64, 512}));
        attempt("moeExperts", () -> experts(DType.BF16, new int[] {64}, 16, 2048, 768, qwen3, new int[] {64}));
        attempt("moeExperts", () -> experts(DType.BF16, new int[] {1, 64, 512, 2048}, 64, 2048, 1408,
                new MoeRouting(MoeRouting.Scoring.SOFTMAX, 6, false, 1, 1, 1f), new int[0]));
        attempt("moeExperts", () -> experts(DType.F32, new int[] {33}, 16, 520, 200, MoeRouting.softmaxTopK(4, false),
                new int[0]));
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

    /**
     * Each of {@code rowCounts} rows through the same {@code experts} experts, routed on the CPU from random logits;
     * then the graph replay ({@link #graphReplay}) at each of {@code graphRows}.
     */
    private void experts(DType dt, int[] rowCounts, int experts, int hidden, int inter, MoeRouting routing,
                         int[] graphRows) {
        Pair gateUp = tw.floats(tw.randomFloats(experts * 2 * inter * hidden, 0.05f, dt), dt, experts, 2L * inter,
                hidden);
        Pair down = tw.floats(tw.randomFloats(experts * hidden * inter, 0.05f, dt), dt, experts, hidden, inter);
        try {
            for (int rows : rowCounts) {
                experts(dt, rows, gateUp, down, routing);
            }
            secondHalf(dt, rowCounts[rowCounts.length - 1], gateUp, down, routing);
            for (int rows : graphRows) {
                attempt("moeExperts graph", () -> graphReplay(rows, gateUp, down, routing));
            }
        } finally {
            // the expert stacks are the large ones: 1.2 GB on each device at Qwen3-30B-A3B's geometry
            close(gateUp, down);
        }
    }

    private void experts(DType dt, int rows, Pair gateUp, Pair down, MoeRouting routing) {
        int experts = (int) gateUp.cpu().dim(0);
        int hidden = (int) down.cpu().dim(1);
        int inter = (int) down.cpu().dim(2);
        int k = routing.topK();
        Pair x = tw.floats(tw.randomFloats(rows * hidden, 1f, dt), dt, rows, hidden);
        Routed first = routed(rows, experts, routing);
        Pair ids = first.ids();
        Pair weights = first.weights();
        Pair out = tw.poisoned(dt, rows, hidden);
        tw.cpu.ops().moeExperts(x.cpu(), gateUp.cpu(), down.cpu(), ids.cpu(), weights.cpu(), out.cpu());
        float[] want = tw.cpu.toFloats(out.cpu());
        String shape = shape(rows, hidden) + " " + experts + "x" + inter + " top" + k;
        for (Way way : Way.of(dt, rows, k, experts)) {
            CudaDevice gpu = way.device(tw.gpu);
            Pair poisoned = tw.poisoned(dt, rows, hidden);
            Runnable gpuOp = () -> gpu.ops().moeExperts(x.gpu(), gateUp.gpu(), down.gpu(), ids.gpu(), weights.gpu(),
                    poisoned.gpu());
            gpuOp.run();
            double err = relErr(want, tw.gpu.toFloats(poisoned.gpu()));
            results.add(new CheckResult("moeExperts" + way.label(rows, k, experts), shape, dt.toString(), err,
                    tolerance(dt), tw.median(gpuOp), "cpu"));
            close(poisoned);
        }
        close(x, ids, weights, out);
    }

    /**
     * Expert parallelism: the device holding the second half of the experts renumbers the routed ids
     * ({@code moeLocalIds}) and runs the experts of its half, against the CPU doing the same.
     */
    private void secondHalf(DType dt, int rows, Pair gateUp, Pair down, MoeRouting routing) {
        int experts = (int) gateUp.cpu().dim(0);
        int hidden = (int) down.cpu().dim(1);
        int inter = (int) down.cpu().dim(2);
        int k = routing.topK();
        int half = experts / 2;
        Pair x = tw.floats(tw.randomFloats(rows * hidden, 1f, dt), dt, rows, hidden);
        Routed routed = routed(rows, experts, routing);
        Pair local = tw.poisoned(DType.I32, rows, k);
        Pair out = tw.poisoned(dt, rows, hidden);
        tw.cpu.ops().moeLocalIds(routed.ids().cpu(), half, half, local.cpu());
        tw.gpu.ops().moeLocalIds(routed.ids().gpu(), half, half, local.gpu());
        results.add(new CheckResult("moeLocalIds", shape(rows, k) + " second half of " + experts, "I32",
                Twin.mismatches(tw.cpu.toInts(local.cpu()), tw.gpu.toInts(local.gpu())), 0, 0, "cpu"));
        Pair gu = new Pair(gateUp.cpu().rows(half, half), gateUp.gpu().rows(half, half));
        Pair dn = new Pair(down.cpu().rows(half, half), down.gpu().rows(half, half));
        tw.cpu.ops().moeExperts(x.cpu(), gu.cpu(), dn.cpu(), local.cpu(), routed.weights().cpu(), out.cpu());
        Runnable gpuOp = () -> tw.gpu.ops().moeExperts(x.gpu(), gu.gpu(), dn.gpu(), local.gpu(),
                routed.weights().gpu(), out.gpu());
        gpuOp.run();
        double err = relErr(tw.cpu.toFloats(out.cpu()), tw.gpu.toFloats(out.gpu()));
        results.add(new CheckResult("moeExperts (expert parallel, second half)", shape(rows, hidden) + " " + experts
                + "x" + inter + " top" + k, dt.toString(), err, tolerance(dt), tw.median(gpuOp), "cpu"));
        close(x, routed.ids(), routed.weights(), local, out);
    }

    /** A routing on both devices: I32 ids and F32 weights {@code [rows, k]}. */
    private record Routed(Pair ids, Pair weights) {}

    /** {@code rows} rows routed on the CPU from random logits, on both devices. */
    private Routed routed(int rows, int experts, MoeRouting routing) {
        int k = routing.topK();
        try (Tensor logits = tw.cpu.fromFloats(tw.randomFloats(rows * experts, 4f, DType.F32), DType.F32, rows, experts);
             Tensor cpuIds = tw.cpu.allocate(DType.I32, rows, k);
             Tensor cpuWeights = tw.cpu.allocate(DType.F32, rows, k)) {
            tw.cpu.ops().moeRoute(logits, routing, cpuIds, cpuWeights);
            return new Routed(tw.ints(tw.cpu.toInts(cpuIds), rows, k),
                    tw.floats(tw.cpu.toFloats(cpuWeights), DType.F32, rows, k));
        }
    }

    /**
     * The tensor-core tiles at {@code rows} rows (bf16 stacks) recorded into a graph under one routing, then replayed after
     * another routing is copied into the same ids and weights: the replay must match the CPU under the second.
     */
    private void graphReplay(int rows, Pair gateUp, Pair down, MoeRouting routing) {
        DType dt = gateUp.cpu().dtype();
        int experts = (int) gateUp.cpu().dim(0);
        int hidden = (int) down.cpu().dim(1);
        int inter = (int) down.cpu().dim(2);
        Pair x = tw.floats(tw.randomFloats(rows * hidden, 1f, dt), dt, rows, hidden);
        Routed first = routed(rows, experts, routing);
        Pair ids = first.ids();
        Pair weights = first.weights();
        Pair out = tw.poisoned(dt, rows, hidden);
        CudaDevice gpu = Way.TILES.device(tw.gpu);
        Runnable gpuOp = () -> gpu.ops().moeExperts(x.gpu(), gateUp.gpu(), down.gpu(), ids.gpu(), weights.gpu(),
                out.gpu());
        gpuOp.run(); // workspace growth stays out of the capture
        Routed other = routed(rows, experts, routing);
        Pair otherIds = other.ids();
        Pair otherWeights = other.weights();
        try (DeviceGraph graph = gpu.capture(gpuOp)) {
            gpu.copy(otherIds.gpu(), ids.gpu());
            gpu.copy(otherWeights.gpu(), weights.gpu());
            graph.replay();
            tw.cpu.ops().moeExperts(x.cpu(), gateUp.cpu(), down.cpu(), otherIds.cpu(), otherWeights.cpu(), out.cpu());
            double err = relErr(tw.cpu.toFloats(out.cpu()), tw.gpu.toFloats(out.gpu()));
            results.add(new CheckResult("moeExperts" + Way.TILES.label(rows, routing.topK(), experts)
                    + ", graph replayed with another routing",
                    shape(rows, hidden) + " " + experts + "x" + inter + " top" + routing.topK(), dt.toString(), err,
                    tolerance(dt), tw.median(graph::replay), "cpu"));
        } finally {
            close(x, ids, weights, out, otherIds, otherWeights);
        }
    }

    /** CudaMoe's ways through the experts, each forced by a device view's MoE GEMM rows. */
    private enum Way {
        CUDA_CORES("", Integer.MAX_VALUE, false), TILES("", Integer.MAX_VALUE, false),
        WARPGROUP("warpgroup GEMM", Integer.MAX_VALUE, true), CUBLAS("cuBLAS", 0, false);

        final String label;
        final int gemmRows;
        final boolean warpgroup;

        Way(String label, int gemmRows, boolean warpgroup) {
            this.label = label;
            this.gemmRows = gemmRows;
            this.warpgroup = warpgroup;
        }

        CudaDevice device(CudaDevice gpu) {
            return gpu.withOptions(gpu.options().withMoeGemmExpertRows(gemmRows).withWarpgroupMoe(warpgroup));
        }

        /** The ways of a dtype at a row count: the warpgroup GEMM only where it serves (else it is the tiles). */
        static List<Way> of(DType dt, int rows, int topK, int experts) {
            if (dt != DType.BF16) {
                return List.of(CUDA_CORES);
            }
            return MoeTiles.warpgroup(rows, topK, experts) ? List.of(TILES, WARPGROUP, CUBLAS) : List.of(TILES, CUBLAS);
        }

        /** The row name's tail: the way, and for the tiles whether the skinny tiles or the grouped GEMM served. */
        String label(int rows, int topK, int experts) {
            if (this == TILES) {
                return MoeTiles.grouped(rows, topK, experts) ? " grouped GEMM" : " skinny tiles";
            }
            return label.isEmpty() ? "" : " " + label;
        }
    }

    private static void close(Pair... pairs) {
        for (Pair p : pairs) {
            p.cpu().close();
            p.gpu().close();
        }
    }
}
