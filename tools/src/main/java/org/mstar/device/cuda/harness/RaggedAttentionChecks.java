package org.mstar.device.cuda.harness;

import static org.mstar.device.cuda.harness.Twin.relErr;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.KernelOptions;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.RaggedAttentionPlan;
import org.mstar.device.Tensor;

/**
 * Ragged (cacheless) attention, CUDA vs reference: packed spans of odd lengths (Whisper-encoder spans of 1500
 * tokens next to short and empty ones), bidirectional, causal and block-causal masks, cross pairs (queries of
 * one span over keys of another), grouped-query heads, every compiled head dim, tensors longer than the plan
 * (a captured bucket's slack rows, which must stay unwritten); bf16 on the tensor-core kernel and, switched,
 * on the CUDA-core one. Then cross-attention as
 * CrossAttentionManager plans it: the paged kernel with a full mask over each request's context pages, decode
 * rows and prompt chunks longer than their context, and a padding row without context.
 */
final class RaggedAttentionChecks {
    private final Twin tw;
    private final List<CheckResult> results;

    RaggedAttentionChecks(Twin twin) {
        this(twin, new ArrayList<>());
    }

    private RaggedAttentionChecks(Twin twin, List<CheckResult> results) {
        this.tw = twin;
        this.results = results;
    }

    /** These checks on a view of the GPU with other kernel options, adding to the same results. */
    private RaggedAttentionChecks on(KernelOptions options) {
        return new RaggedAttentionChecks(tw.on(tw.gpu.withOptions(options)), results);
    }

    private record Geometry(int qoHeads, int kvHeads, int headDim) {
        String describe() {
            return "q" + qoHeads + "/kv" + kvHeads + " d" + headDim;
        }
    }

    List<CheckResult> run() {
        int[] whisper = {1500, 1500, 700, 1};
        int[] odd = {37, 100, 1, 0, 513, 64};
        for (DType dt : List.of(DType.F32, DType.BF16)) {
            Geometry small = new Geometry(12, 12, 64);
            ragged("encoder full", dt, small, whisper, whisper, RaggedAttentionPlan.FULL, 0);
            ragged("causal", dt, new Geometry(32, 8, 128), odd, odd, RaggedAttentionPlan.CAUSAL, 0);
            ragged("block-causal B=16", dt, new Geometry(16, 4, 64), odd, odd, 16, 0);
            ragged("cross", dt, new Geometry(16, 4, 128), new int[] {4, 1, 30, 0, 200},
                    new int[] {1500, 7, 20, 9, 333}, RaggedAttentionPlan.FULL, 0);
            ragged("full, 40 slack rows", dt, new Geometry(8, 8, 64), odd, odd, RaggedAttentionPlan.FULL, 40);
        }
        ragged("causal d32", DType.BF16, new Geometry(4, 2, 32), odd, odd, RaggedAttentionPlan.CAUSAL, 0);
        ragged("block-causal B=7 d256", DType.BF16, new Geometry(8, 4, 256), odd, odd, 7, 0);
        ragged("full d256", DType.F32, new Geometry(8, 8, 256), odd, odd, RaggedAttentionPlan.FULL, 0);
        ragged("encoder full d64 (whisper-large heads)", DType.BF16, new Geometry(20, 20, 64), whisper, whisper,
                RaggedAttentionPlan.FULL, 0);
        ragged("tc causal d80", DType.BF16, new Geometry(32, 8, 80), odd, odd, RaggedAttentionPlan.CAUSAL, 0);
        ragged("tc block-causal B=5 d96 group6", DType.BF16, new Geometry(24, 4, 96), odd, odd, 5, 0);
        ragged("tc causal d192 (DeepSeek-V2's up-projected prefill)", DType.BF16, new Geometry(16, 16, 192), odd, odd,
                RaggedAttentionPlan.CAUSAL, 0);
        // the warpgroup kernel (on Hopper; elsewhere these rows run the mma.sync kernel again)
        RaggedAttentionChecks warpgroup = on(tw.gpu.options().withWarpgroupAttention(true));
        warpgroup.ragged("tc (warpgroup) causal d192", DType.BF16, new Geometry(16, 16, 192), odd, odd,
                RaggedAttentionPlan.CAUSAL, 0);
        warpgroup.ragged("tc (warpgroup) block-causal B=16 d128", DType.BF16, new Geometry(16, 4, 128), odd, odd, 16, 0);
        warpgroup.ragged("tc (warpgroup) cross d128", DType.BF16, new Geometry(16, 4, 128), new int[] {4, 1, 30, 0, 200},
                new int[] {1500, 7, 20, 9, 333}, RaggedAttentionPlan.FULL, 0);
        RaggedAttentionChecks cudaCores = on(tw.gpu.options().withTensorCorePrefill(false));
        cudaCores.ragged("cuda-core (bf16, switched) encoder full", DType.BF16, new Geometry(12, 12, 64), whisper,
                whisper, RaggedAttentionPlan.FULL, 0);
        cudaCores.ragged("cuda-core (bf16, switched) block-causal B=16", DType.BF16, new Geometry(16, 4, 128), odd, odd,
                16, 24);
        for (DType dt : List.of(DType.F32, DType.BF16)) {
            crossPaged("cross (paged) decode rows", dt, new Geometry(12, 12, 64), new int[] {1, 1, 1, 1},
                    new int[] {1500, 7, 1500, 0});
            crossPaged("cross (paged) prompt chunks", dt, new Geometry(16, 16, 64), new int[] {4, 30, 1, 200},
                    new int[] {1500, 20, 0, 1500});
            crossPaged("cross (paged) decode rows d128", dt, new Geometry(32, 8, 128), new int[] {1, 1, 1},
                    new int[] {1500, 3, 0});
        }
        // printed now as well as in the final table, so a later check that hangs or crashes does not lose them
        System.out.print(CheckResult.table(results));
        return results;
    }

    private static String spans(int[] s) {
        return s.length > 6 ? s.length + " spans" : Arrays.toString(s).replace(" ", "");
    }

    private static int[] indptr(int[] spans) {
        int[] p = new int[spans.length + 1];
        for (int i = 0; i < spans.length; i++) {
            p[i + 1] = p[i] + spans[i];
        }
        return p;
    }

    private void ragged(String name, DType dt, Geometry g, int[] qSpans, int[] kvSpans, int causalBlock, int slack) {
        CheckResult.attempt(results, "ragged attention " + name + " " + dt,
                () -> compareRagged(name, dt, g, qSpans, kvSpans, causalBlock, slack));
    }

    private void compareRagged(String name, DType dt, Geometry g, int[] qSpans, int[] kvSpans, int causalBlock,
                               int slack) {
        int[] qIndptr = indptr(qSpans);
        int[] kvIndptr = indptr(kvSpans);
        int totalQ = qIndptr[qSpans.length];
        int totalKv = kvIndptr[kvSpans.length];
        int qRows = totalQ + slack;
        int kvRows = totalKv + slack;
        float[] q = tw.randomFloats(qRows * g.qoHeads * g.headDim, 1f, dt);
        float[] k = tw.randomFloats(kvRows * g.kvHeads * g.headDim, 1f, dt);
        float[] v = tw.randomFloats(kvRows * g.kvHeads * g.headDim, 1f, dt);
        int maxQ = Arrays.stream(qSpans).max().orElse(0);
        int maxKv = Arrays.stream(kvSpans).max().orElse(0);
        float scale = (float) (1 / Math.sqrt(g.headDim));
        List<Tensor> owned = new ArrayList<>();
        try {
            Tensor[] cpu = ragged(tw.cpu, dt, g, q, k, v, qRows, kvRows, owned);
            Tensor[] gpu = ragged(tw.gpu, dt, g, q, k, v, qRows, kvRows, owned);
            RaggedAttentionPlan cpuPlan = new RaggedAttentionPlan(qSpans.length, own(owned, tw.cpu.fromInts(qIndptr,
                    qIndptr.length)), own(owned, tw.cpu.fromInts(kvIndptr, kvIndptr.length)), totalQ, totalKv, maxQ, maxKv,
                    causalBlock, scale);
            RaggedAttentionPlan gpuPlan = new RaggedAttentionPlan(qSpans.length, own(owned, tw.gpu.fromInts(qIndptr,
                    qIndptr.length)), own(owned, tw.gpu.fromInts(kvIndptr, kvIndptr.length)), totalQ, totalKv,
                    maxQ + slack, maxKv + slack, causalBlock, scale);
            tw.cpu.ops().raggedAttention(cpu[0], cpu[1], cpu[2], cpuPlan, cpu[3]);
            Runnable gpuOp = () -> tw.gpu.ops().raggedAttention(gpu[0], gpu[1], gpu[2], gpuPlan, gpu[3]);
            gpuOp.run();
            int width = g.qoHeads * g.headDim;
            float[] ref = tw.cpu.toFloats(cpu[3]);
            float[] got = tw.gpu.toFloats(gpu[3]);
            double err = relErr(Arrays.copyOf(ref, totalQ * width), Arrays.copyOf(got, totalQ * width));
            for (int i = totalQ * width; i < got.length; i++) {
                if (!Float.isNaN(got[i])) {
                    err = Double.POSITIVE_INFINITY; // a slack row was written
                }
            }
            String mask = causalBlock == RaggedAttentionPlan.FULL ? "full"
                    : causalBlock == RaggedAttentionPlan.CAUSAL ? "causal" : "block" + causalBlock;
            String shape = g.describe() + " " + mask + " q" + spans(qSpans)
                    + (qSpans == kvSpans ? "" : " kv" + spans(kvSpans)) + (slack > 0 ? " +" + slack + " slack" : "");
            results.add(new CheckResult("ragged attention " + name, shape, dt.toString(), err, Twin.tolerance(dt),
                    tw.median(gpuOp), "cpu"));
        } finally {
            owned.forEach(Tensor::close);
        }
    }

    /** q, k, v and a poisoned out on one device. */
    private static Tensor[] ragged(Device d, DType dt, Geometry g, float[] q, float[] k, float[] v, int qRows,
                                   int kvRows, List<Tensor> owned) {
        return new Tensor[] {
            own(owned, d.fromFloats(q, dt, qRows, g.qoHeads, g.headDim)),
            own(owned, d.fromFloats(k, dt, kvRows, g.kvHeads, g.headDim)),
            own(owned, d.fromFloats(v, dt, kvRows, g.kvHeads, g.headDim)),
            own(owned, Twin.poison(d, d.allocate(dt, qRows, g.qoHeads, g.headDim)))};
    }

    private static Tensor own(List<Tensor> owned, Tensor t) {
        owned.add(t);
        return t;
    }

    private void crossPaged(String name, DType dt, Geometry g, int[] qLens, int[] contextLens) {
        CheckResult.attempt(results, "attention " + name + " " + dt,
                () -> compareCrossPaged(name, dt, g, qLens, contextLens));
    }

    /** The plan CrossAttentionPlan builds: each row's context pages, no pages for a row without context, full mask. */
    private void compareCrossPaged(String name, DType dt, Geometry g, int[] qLens, int[] contextLens) {
        int pageSize = 16;
        int rows = qLens.length;
        int[] qoIndptr = indptr(qLens);
        int[] kvIndptr = new int[rows + 1];
        int[] lastPageLen = new int[rows];
        for (int r = 0; r < rows; r++) {
            int pages = (contextLens[r] + pageSize - 1) / pageSize;
            kvIndptr[r + 1] = kvIndptr[r] + pages;
            lastPageLen[r] = pages == 0 ? 1 : contextLens[r] - (pages - 1) * pageSize;
        }
        int poolPages = kvIndptr[rows] + 3;
        int[] indices = new int[kvIndptr[rows]];
        for (int i = 0; i < indices.length; i++) {
            indices[i] = poolPages - 1 - i; // pages in reverse order, none at 0 (the sink)
        }
        int totalQ = qoIndptr[rows];
        float[] q = tw.randomFloats(totalQ * g.qoHeads * g.headDim, 1f, dt);
        float[] pool = tw.randomFloats(poolPages * 2 * pageSize * g.kvHeads * g.headDim, 1f, dt);
        int maxQ = Arrays.stream(qLens).max().orElse(0);
        int maxKv = Arrays.stream(contextLens).max().orElse(0);
        List<Tensor> owned = new ArrayList<>();
        try {
            Tensor[] cpu = paged(tw.cpu, dt, g, q, pool, poolPages, pageSize, totalQ, owned);
            Tensor[] gpu = paged(tw.gpu, dt, g, q, pool, poolPages, pageSize, totalQ, owned);
            PagedAttentionPlan cpuPlan = plan(tw.cpu, qoIndptr, kvIndptr, indices, lastPageLen, pageSize, totalQ, maxQ,
                    maxKv, g, owned);
            PagedAttentionPlan gpuPlan = plan(tw.gpu, qoIndptr, kvIndptr, indices, lastPageLen, pageSize, totalQ, maxQ,
                    maxKv, g, owned);
            tw.cpu.ops().pagedAttention(cpu[0], cpu[1], 0, cpuPlan, cpu[2]);
            Runnable gpuOp = () -> tw.gpu.ops().pagedAttention(gpu[0], gpu[1], 0, gpuPlan, gpu[2]);
            gpuOp.run();
            double err = relErr(tw.cpu.toFloats(cpu[2]), tw.gpu.toFloats(gpu[2]));
            String shape = g.describe() + " q" + spans(qLens) + " context" + spans(contextLens);
            results.add(new CheckResult("attention " + name, shape, dt.toString(), err, Twin.tolerance(dt),
                    tw.median(gpuOp), "cpu"));
        } finally {
            owned.forEach(Tensor::close);
        }
    }

    private static Tensor[] paged(Device d, DType dt, Geometry g, float[] q, float[] pool, int poolPages, int pageSize,
                                  int totalQ, List<Tensor> owned) {
        return new Tensor[] {
            own(owned, d.fromFloats(q, dt, totalQ, g.qoHeads, g.headDim)),
            own(owned, d.fromFloats(pool, dt, 1, poolPages, 2, pageSize, g.kvHeads, g.headDim)),
            own(owned, Twin.poison(d, d.allocate(dt, totalQ, g.qoHeads, g.headDim)))};
    }

    private static PagedAttentionPlan plan(Device d, int[] qoIndptr, int[] kvIndptr, int[] indices, int[] lastPageLen,
                                           int pageSize, int totalQ, int maxQ, int maxKv, Geometry g,
                                           List<Tensor> owned) {
        int rows = lastPageLen.length;
        return new PagedAttentionPlan(rows, own(owned, d.fromInts(qoIndptr, rows + 1)),
                own(owned, d.fromInts(kvIndptr, rows + 1)), own(owned, d.fromInts(indices, indices.length)),
                own(owned, d.fromInts(lastPageLen, rows)), pageSize, totalQ, maxQ, maxKv, false, -1, false,
                (float) (1 / Math.sqrt(g.headDim)));
    }
}
