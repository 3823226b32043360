package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.mstar.device.DType;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.CudaDevice;

/**
 * Paged attention at Llama-3-8B's geometry (32 query heads, 8 KV heads, head dim 128, bf16, 16-token pages
 * scattered through the pool). Decode: bytes that must move (every visible K and V once, plus q and out)
 * over the median time of graph-replayed calls, against the copy bandwidth of the card; over a bf16 pool, or over an
 * FP8 (E4M3) one, whose keys and values move one byte an element. Prefill: equal causal prompts, FLOPs of the visible
 * score and value products over the median time.
 */
final class AttentionBench {
    private static final int QO_HEADS = 32;
    private static final int KV_HEADS = 8;
    private static final int HEAD_DIM = 128;
    private static final int PAGE = 16;

    private final Twin tw;

    AttentionBench(Twin twin) {
        this.tw = twin;
    }

    record Row(DType kv, int context, int batch, double megabytes, double micros, double terabytesPerSecond) {}

    /** @param cases {context, batch} pairs */
    List<Row> run(int[][] cases) {
        return run(cases, DType.BF16);
    }

    /** @param cases {context, batch} pairs, over a pool of {@code kv} (BF16 or F8_E4M3) */
    List<Row> run(int[][] cases, DType kv) {
        int maxTokens = 0;
        for (int[] c : cases) {
            maxTokens = Math.max(maxTokens, c[0] * c[1]);
        }
        int pages = maxTokens / PAGE + 16;
        List<Row> rows = new ArrayList<>();
        try (Tensor pool = random(tw, kv, 1, pages, 2, PAGE, KV_HEADS, HEAD_DIM)) {
            for (int[] c : cases) {
                rows.add(measure(pool, pages, c[0], c[1]));
            }
        }
        return rows;
    }

    private Row measure(Tensor pool, int pages, int context, int batch) {
        CudaDevice gpu = tw.gpu;
        int perSeq = (context + PAGE - 1) / PAGE;
        int[] qoIndptr = new int[batch + 1];
        int[] kvIndptr = new int[batch + 1];
        int[] last = new int[batch];
        int[] perm = Twin.permutation(tw.rnd, pages);
        for (int r = 0; r < batch; r++) {
            qoIndptr[r + 1] = r + 1;
            kvIndptr[r + 1] = (r + 1) * perSeq;
            last[r] = context - (perSeq - 1) * PAGE;
        }
        int[] indices = java.util.Arrays.copyOf(perm, batch * perSeq);
        try (Tensor q = gpu.fromFloats(tw.randomFloats(batch * QO_HEADS * HEAD_DIM, 1f, DType.BF16), DType.BF16, batch,
                QO_HEADS, HEAD_DIM);
             Tensor out = gpu.allocate(DType.BF16, batch, QO_HEADS, HEAD_DIM);
             Tensor qo = gpu.fromInts(qoIndptr, batch + 1);
             Tensor kv = gpu.fromInts(kvIndptr, batch + 1);
             Tensor idx = gpu.fromInts(indices, indices.length);
             Tensor lastT = gpu.fromInts(last, batch)) {
            PagedAttentionPlan plan = new PagedAttentionPlan(batch, qo, kv, idx, lastT, PAGE, batch, 1, context, true,
                    -1, false, (float) (1 / Math.sqrt(HEAD_DIM)));
            double ms = Timing.graphedMillisPerCall(gpu, i -> gpu.ops().pagedAttention(q, pool, 0, plan, out));
            double bytes = (double) batch * context * KV_HEADS * HEAD_DIM * 2 * pool.dtype().bytes()
                    + 2.0 * batch * QO_HEADS * HEAD_DIM * 2;
            return new Row(pool.dtype(), context, batch, bytes / 1e6, ms * 1e3, bytes / (ms * 1e-3) / 1e12);
        }
    }

    /** Device-to-device copy of 1 GiB, bytes read plus written per second: the roofline for decode. */
    double copyTerabytesPerSecond() {
        CudaDevice gpu = tw.gpu;
        try (Tensor a = randomBf16(tw, 1L << 29); Tensor b = gpu.allocate(DType.BF16, 1L << 29)) {
            double ms = Timing.medianMillis(gpu, () -> gpu.copy(a, b), 2, 9);
            return 2.0 * a.byteSize() / (ms * 1e-3) / 1e12;
        }
    }

    /** The prefill kernels a row can time: Hopper's warpgroup one, the mma.sync tensor-core one, the CUDA-core one. */
    enum PrefillKernel {
        WARPGROUP("warpgroup (wgmma)"), TENSOR_CORES("tensor cores (mma.sync)"), CUDA_CORES("CUDA cores");

        final String label;

        PrefillKernel(String label) {
            this.label = label;
        }

        /** The kernels this GPU has: the warpgroup one on sm_90 only. */
        static List<PrefillKernel> on(CudaDevice gpu) {
            return gpu.context().hasWarpgroupProducts() ? List.of(values()) : List.of(TENSOR_CORES, CUDA_CORES);
        }

        /** The tensor-core kernel the device's options choose. */
        static PrefillKernel chosenBy(CudaDevice gpu) {
            return gpu.context().hasWarpgroupProducts() && gpu.options().warpgroupAttention() ? WARPGROUP
                    : TENSOR_CORES;
        }
    }

    record PrefillRow(int tokens, int batch, PrefillKernel kernel, double millis, double tflops) {}

    /**
     * {@code batch} causal prompts of {@code tokens} each in one plan, on the given kernel; FLOPs count the visible
     * score and value products only (causal tiles skipped by every kernel).
     */
    PrefillRow prefill(int tokens, int batch, PrefillKernel kernel) {
        CudaDevice gpu = tw.gpu.withOptions(tw.gpu.options().withTensorCorePrefill(kernel != PrefillKernel.CUDA_CORES)
                .withWarpgroupAttention(kernel == PrefillKernel.WARPGROUP));
        int perSeq = (tokens + PAGE - 1) / PAGE;
        int pages = perSeq * batch;
        int[] indices = Twin.permutation(tw.rnd, pages);
        int[] qoIndptr = new int[batch + 1];
        int[] kvIndptr = new int[batch + 1];
        int[] last = new int[batch];
        for (int r = 0; r < batch; r++) {
            qoIndptr[r + 1] = (r + 1) * tokens;
            kvIndptr[r + 1] = (r + 1) * perSeq;
            last[r] = tokens - (perSeq - 1) * PAGE;
        }
        try (Tensor pool = randomBf16(tw, 1, pages, 2, PAGE, KV_HEADS, HEAD_DIM);
             Tensor q = randomBf16(tw, (long) batch * tokens, QO_HEADS, HEAD_DIM);
             Tensor out = gpu.allocate(DType.BF16, (long) batch * tokens, QO_HEADS, HEAD_DIM);
             Tensor qo = gpu.fromInts(qoIndptr, batch + 1);
             Tensor kv = gpu.fromInts(kvIndptr, batch + 1);
             Tensor idx = gpu.fromInts(indices, pages);
             Tensor lastT = gpu.fromInts(last, batch)) {
            PagedAttentionPlan plan = new PagedAttentionPlan(batch, qo, kv, idx, lastT, PAGE, batch * tokens, tokens,
                    tokens, true, -1, false, (float) (1 / Math.sqrt(HEAD_DIM)));
            double ms = Timing.medianMillis(gpu, () -> gpu.ops().pagedAttention(q, pool, 0, plan, out), 1, 5);
            double flops = batch * 4.0 * QO_HEADS * HEAD_DIM * ((double) tokens * (tokens + 1) / 2);
            return new PrefillRow(tokens, batch, kernel, ms, flops / (ms * 1e-3) / 1e12);
        }
    }

    static String prefillTable(List<PrefillRow> rows) {
        StringBuilder sb = new StringBuilder("| tokens per prompt (causal) | prompts | kernel | ms | TFLOP/s |\n"
                + "|---|---|---|---|---|\n");
        for (PrefillRow r : rows) {
            sb.append(String.format(Locale.ROOT, "| %d | %d | %s | %.3f | %.1f |%n", r.tokens, r.batch,
                    r.kernel.label, r.millis, r.tflops));
        }
        return sb.toString();
    }

    /** A bf16 tensor of random values, filled by tiling one uploaded random block on the device. */
    static Tensor randomBf16(Twin tw, long... shape) {
        return random(tw, DType.BF16, shape);
    }

    /** A tensor of {@code dt} (a float type or FP8 codes) of random values, tiled as {@link #randomBf16}. */
    static Tensor random(Twin tw, DType dt, long... shape) {
        CudaDevice gpu = tw.gpu;
        Tensor t = gpu.allocate(dt, shape);
        long n = t.numel();
        Tensor flat = t.reshape(n);
        int tileLen = (int) Math.min(n, 4L << 20);
        try (Tensor tile = gpu.fromFloats(tw.randomFloats(tileLen, 1f, DType.BF16), dt, tileLen)) {
            for (long off = 0; off < n; off += tileLen) {
                long len = Math.min(tileLen, n - off);
                gpu.copy(tile.rows(0, len), flat.rows(off, len));
            }
        }
        return t;
    }

    static String table(List<Row> rows, double peakTbPerS) {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "| context | batch | MB moved | µs | TB/s | of %.2f TB/s |%n", peakTbPerS));
        sb.append("|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "| %d | %d | %.1f | %.1f | %.2f | %.0f%% |%n", r.context, r.batch,
                    r.megabytes, r.micros, r.terabytesPerSecond, 100 * r.terabytesPerSecond / peakTbPerS));
        }
        return sb.toString();
    }

    /**
     * Rows of the same cases over a bf16 and an FP8 pool side by side, by case: the FP8 row's time over the bf16 one's
     * is what the smaller reads buy once the kernel widens the codes.
     */
    static String kvDTypeTable(List<Row> bf16, List<Row> fp8, double peakTbPerS) {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "| context | batch | KV | MB moved | µs | TB/s | of %.2f TB/s | FP8 / bf16 "
                + "time |%n", peakTbPerS));
        sb.append("|---|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < bf16.size(); i++) {
            for (Row r : List.of(bf16.get(i), fp8.get(i))) {
                sb.append(String.format(Locale.ROOT, "| %d | %d | %s | %.1f | %.1f | %.2f | %.0f%% | %s |%n", r.context,
                        r.batch, r.kv == DType.F8_E4M3 ? "fp8_e4m3" : "bf16", r.megabytes, r.micros,
                        r.terabytesPerSecond, 100 * r.terabytesPerSecond / peakTbPerS, r == bf16.get(i) ? ""
                                : String.format(Locale.ROOT, "%.3f", r.micros / bf16.get(i).micros)));
            }
        }
        return sb.toString();
    }
}
