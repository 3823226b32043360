package org.mstar.device.cuda.harness;

import static org.mstar.device.cuda.harness.Twin.relErr;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.KernelOptions;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.Tensor;

/**
 * Paged attention, CUDA vs reference, over decode and prefill/append batches with odd lengths (not
 * multiples of the page or tile size), grouped-query heads, windows, context-only masks, empty sequences,
 * pages scattered at random through the pool; decode cut into many slices (one long sequence), into none (a
 * large batch) and into more slices than the grid has blocks (one long sequence in a large batch).
 */
final class AttentionChecks {
    private final Twin tw;
    private final List<CheckResult> results;

    AttentionChecks(Twin twin) {
        this(twin, new ArrayList<>());
    }

    private AttentionChecks(Twin twin, List<CheckResult> results) {
        this.tw = twin;
        this.results = results;
    }

    /** These checks on a view of the GPU with other kernel options, adding to the same results. */
    private AttentionChecks on(KernelOptions options) {
        return new AttentionChecks(tw.on(tw.gpu.withOptions(options)), results);
    }

    /** Query and key lengths of one batch: sequence r has qLens[r] queries at the end of kvLens[r] keys. */
    private record Batch(int[] qLens, int[] kvLens) {
        /** {@code rows} decode rows of {@code kvLen} keys each, but for {@code longKv} keys in row 0. */
        static Batch decode(int rows, int kvLen, int longKv) {
            int[] qLens = new int[rows];
            int[] kvLens = new int[rows];
            Arrays.fill(qLens, 1);
            Arrays.fill(kvLens, kvLen);
            kvLens[0] = longKv;
            return new Batch(qLens, kvLens);
        }
    }

    private record Geometry(int qoHeads, int kvHeads, int headDim, int pageSize) {}

    /** A batch on the host: page tables as int arrays, q and the pool as the values the devices hold. */
    private record AttentionCase(float[] q, float[] pool, int layer, int pages, int pageSize, int kvHeads, int headDim,
                                 int qoHeads, int[] qoIndptr, int[] kvIndptr, int[] kvIndices, int[] lastPageLen,
                                 boolean causal, int windowLeft, boolean contextOnly, float smScale) {}

    List<CheckResult> run() {
        Geometry llama = new Geometry(32, 8, 128, 16);
        Batch decode = new Batch(new int[] {1, 1, 1, 1, 1}, new int[] {1, 17, 300, 3000, 5000});
        Batch prefill = new Batch(new int[] {37, 5, 64, 1, 0, 100}, new int[] {37, 100, 64, 50, 20, 1000});
        for (DType dt : List.of(DType.F32, DType.BF16)) {
            check("decode", dt, llama, decode, true, -1, false);
            check("decode window=100", dt, llama, decode, true, 100, false);
            check("decode contextOnly", dt, llama, decode, true, -1, true);
            check("prefill causal", dt, llama, prefill, true, -1, false);
            check("prefill full", dt, llama, prefill, false, -1, false);
            check("prefill causal window=20", dt, llama, prefill, true, 20, false);
            check("prefill contextOnly", dt, llama, prefill, true, -1, true);
        }
        check("decode d64 group8", DType.F32, new Geometry(16, 2, 64, 8), decode, true, -1, false);
        check("decode d256 group2", DType.BF16, new Geometry(8, 4, 256, 16), decode, true, -1, false);
        check("decode group6", DType.BF16, new Geometry(24, 4, 128, 16), decode, true, -1, false);
        check("prefill d64 group8", DType.BF16, new Geometry(16, 2, 64, 8), prefill, true, -1, false);
        check("prefill d256", DType.F32, new Geometry(8, 4, 256, 16), prefill, true, -1, false);
        // the bundled demo model's heads
        check("decode d32 group2", DType.BF16, new Geometry(4, 2, 32, 16), decode, true, -1, false);
        check("decode d32 group4", DType.F32, new Geometry(4, 1, 32, 16), decode, true, -1, false);
        check("prefill d32", DType.BF16, new Geometry(4, 2, 32, 16), prefill, true, -1, false);
        check("prefill d32", DType.F32, new Geometry(4, 2, 32, 16), prefill, true, -1, false);
        tensorCorePrefill();
        splitDecode(llama);
        return results;
    }

    /**
     * The bf16 tensor-core prefill kernel at every head dim it is compiled for: ragged batches whose query
     * and key counts cross its 64-row and key tiles, chunks appended to a cached prefix (fewer queries than
     * keys), grouped-query heads whose group does not divide the row tile, windows, full and context-only
     * masks; decode at the head dims the decode kernel lacks and at every head dim under batch-invariant numerics;
     * the CUDA-core kernel it replaced for bf16, which stays reachable; on Hopper, the warpgroup kernel at d128 through
     * its switch (causal, chunks after a prefix, a window, full and context-only masks, ungrouped heads).
     */
    private void tensorCorePrefill() {
        Batch ragged = new Batch(new int[] {300, 1, 77, 513, 0, 16}, new int[] {300, 2000, 1077, 513, 40, 16});
        Batch chunks = new Batch(new int[] {64, 129, 200}, new int[] {2112, 1129, 3000});
        for (int d : new int[] {64, 80, 96, 128, 256}) {
            Geometry g = new Geometry(32, 8, d, 16);
            check("tc prefill causal d" + d, DType.BF16, g, ragged, true, -1, false);
            check("tc prefill chunk after prefix d" + d, DType.BF16, g, chunks, true, -1, false);
            check("tc prefill causal window=100 d" + d, DType.BF16, g, ragged, true, 100, false);
        }
        Geometry llama = new Geometry(32, 8, 128, 16);
        check("tc prefill full", DType.BF16, llama, ragged, false, -1, false);
        check("tc prefill contextOnly", DType.BF16, llama, chunks, true, -1, true);
        check("tc prefill chunk window=300", DType.BF16, llama, chunks, true, 300, false);
        check("tc prefill group1", DType.BF16, new Geometry(8, 8, 128, 16), ragged, true, -1, false);
        check("tc prefill group6 page8", DType.BF16, new Geometry(24, 4, 64, 8), ragged, true, -1, false);
        Batch decode = new Batch(new int[] {1, 1, 1, 1}, new int[] {1, 70, 700, 3000});
        check("tc decode d80", DType.BF16, new Geometry(32, 8, 80, 16), decode, true, -1, false);
        check("tc decode d96 window=100", DType.BF16, new Geometry(32, 32, 96, 16), decode, true, 100, false);
        AttentionChecks invariant = on(tw.gpu.options().withBatchInvariant(true));
        for (int d : new int[] {64, 128, 256}) {
            invariant.check("tc decode, batch-invariant d" + d, DType.BF16, new Geometry(32, 8, d, 16), decode, true,
                    -1, false);
        }
        invariant.check("tc decode, batch-invariant group1 window=100", DType.BF16, new Geometry(8, 8, 128, 16),
                decode, true, 100, false);
        on(tw.gpu.options().withTensorCorePrefill(false)).check("cuda-core prefill (bf16, switched)", DType.BF16,
                llama, ragged, true, -1, false);
        // the warpgroup kernel (on Hopper; elsewhere these rows run the mma.sync kernel again)
        AttentionChecks warpgroup = on(tw.gpu.options().withWarpgroupAttention(true));
        warpgroup.check("tc prefill (warpgroup) causal d128", DType.BF16, llama, ragged, true, -1, false);
        warpgroup.check("tc prefill (warpgroup) chunk after prefix d128", DType.BF16, llama, chunks, true, -1, false);
        warpgroup.check("tc prefill (warpgroup) chunk window=300", DType.BF16, llama, chunks, true, 300, false);
        warpgroup.check("tc prefill (warpgroup) full", DType.BF16, llama, ragged, false, -1, false);
        warpgroup.check("tc prefill (warpgroup) contextOnly", DType.BF16, llama, chunks, true, -1, true);
        warpgroup.check("tc prefill (warpgroup) group1", DType.BF16, new Geometry(8, 8, 128, 16), ragged, true, -1,
                false);
    }

    /** Host arrays of one batch laid out in a pool with its pages in random order. */
    private AttentionCase build(DType dt, Geometry g, Batch b, boolean causal, int windowLeft, boolean contextOnly) {
        int rows = b.qLens.length;
        int[] qoIndptr = new int[rows + 1];
        int[] kvIndptr = new int[rows + 1];
        int[] lastPageLen = new int[rows];
        for (int r = 0; r < rows; r++) {
            int pages = (b.kvLens[r] + g.pageSize - 1) / g.pageSize;
            qoIndptr[r + 1] = qoIndptr[r] + b.qLens[r];
            kvIndptr[r + 1] = kvIndptr[r] + pages;
            lastPageLen[r] = pages == 0 ? 0 : b.kvLens[r] - (pages - 1) * g.pageSize;
        }
        int totalPages = kvIndptr[rows] + 7; // a few pages nobody owns
        int[] perm = Twin.permutation(tw.rnd, totalPages);
        int[] kvIndices = Arrays.copyOf(perm, kvIndptr[rows]);
        int layers = 2;
        float[] pool = tw.randomFloats(layers * totalPages * 2 * g.pageSize * g.kvHeads * g.headDim, 1f, dt);
        float[] q = tw.randomFloats(qoIndptr[rows] * g.qoHeads * g.headDim, 1f, dt);
        return new AttentionCase(q, pool, 1, totalPages, g.pageSize, g.kvHeads, g.headDim, g.qoHeads, qoIndptr,
                kvIndptr, kvIndices, lastPageLen, causal, windowLeft, contextOnly, (float) (1 / Math.sqrt(g.headDim)));
    }

    /** The plan and tensors of a case on one device; closing releases them. */
    private static final class OnDevice implements AutoCloseable {
        final Tensor q;
        final Tensor pool;
        final Tensor out;
        final PagedAttentionPlan plan;
        private final List<Tensor> owned = new ArrayList<>();

        OnDevice(Device d, AttentionCase c, DType dt, DType poolDt, int maxKvBound) {
            int totalQo = c.qoIndptr()[c.qoIndptr().length - 1];
            int rows = c.qoIndptr().length - 1;
            q = keep(d.fromFloats(c.q(), dt, totalQo, c.qoHeads(), c.headDim()));
            pool = keep(d.fromFloats(c.pool(), poolDt, 2, c.pages(), 2, c.pageSize(), c.kvHeads(), c.headDim()));
            out = keep(Twin.poison(d, d.allocate(dt, totalQo, c.qoHeads(), c.headDim())));
            int maxQo = 0;
            int maxKv = 0;
            for (int r = 0; r < rows; r++) {
                maxQo = Math.max(maxQo, c.qoIndptr()[r + 1] - c.qoIndptr()[r]);
                int pages = c.kvIndptr()[r + 1] - c.kvIndptr()[r];
                maxKv = Math.max(maxKv, pages == 0 ? 0 : (pages - 1) * c.pageSize() + c.lastPageLen()[r]);
            }
            plan = new PagedAttentionPlan(rows, keep(d.fromInts(c.qoIndptr(), rows + 1)),
                    keep(d.fromInts(c.kvIndptr(), rows + 1)),
                    keep(d.fromInts(c.kvIndices(), c.kvIndices().length)),
                    keep(d.fromInts(c.lastPageLen(), rows)), c.pageSize(), totalQo, maxQo, Math.max(maxKv, maxKvBound),
                    c.causal(),
                    c.windowLeft(), c.contextOnly(), c.smScale());
        }

        private Tensor keep(Tensor t) {
            owned.add(t);
            return t;
        }

        @Override
        public void close() {
            owned.forEach(Tensor::close);
        }
    }

    private void check(String name, DType dt, Geometry g, Batch b, boolean causal, int windowLeft, boolean contextOnly) {
        check(name, dt, g, b, causal, windowLeft, contextOnly, 0);
    }

    /** @param maxKvBound the plan's bound on key counts when above the batch's longest (0: the longest) */
    private void check(String name, DType dt, Geometry g, Batch b, boolean causal, int windowLeft, boolean contextOnly,
                       int maxKvBound) {
        check(name, dt, dt, g, b, causal, windowLeft, contextOnly, maxKvBound);
    }

    /** @param poolDt the pool's dtype: {@code dt}, or F8_E4M3 under bf16 queries */
    private void check(String name, DType dt, DType poolDt, Geometry g, Batch b, boolean causal, int windowLeft,
                       boolean contextOnly, int maxKvBound) {
        String kv = poolDt == dt ? "" : " " + poolDt + " KV";
        CheckResult.attempt(results, "attention " + name + " " + dt + kv, () -> compare(name + kv, dt, poolDt, g, b,
                causal, windowLeft, contextOnly, maxKvBound));
    }

    /**
     * Decode and prefill over FP8 (E4M3) pages under bf16 queries, against the CPU over the same codes: Llama-3-8B's
     * heads (decode a group of 4; prefill causal, windowed, context-only, after a cached prefix), a group of 8 (two
     * blocks of 4 heads each in decode), every head dim the CUDA-core kernels take, and decode cut into many slices.
     */
    List<CheckResult> fp8Kv() {
        Geometry llama = new Geometry(32, 8, 128, 16);
        Batch decode = new Batch(new int[] {1, 1, 1, 1, 1}, new int[] {1, 17, 300, 3000, 5000});
        Batch prefill = new Batch(new int[] {37, 5, 64, 1, 0, 100}, new int[] {37, 100, 64, 50, 20, 1000});
        DType bf16 = DType.BF16;
        DType fp8 = DType.F8_E4M3;
        check("decode", bf16, fp8, llama, decode, true, -1, false, 0);
        check("decode window=100", bf16, fp8, llama, decode, true, 100, false, 0);
        check("prefill causal", bf16, fp8, llama, prefill, true, -1, false, 0);
        check("prefill causal window=20", bf16, fp8, llama, prefill, true, 20, false, 0);
        check("prefill contextOnly", bf16, fp8, llama, prefill, true, -1, true, 0);
        check("decode d64 group8", bf16, fp8, new Geometry(16, 2, 64, 8), decode, true, -1, false, 0);
        check("decode group6", bf16, fp8, new Geometry(24, 4, 128, 16), decode, true, -1, false, 0);
        for (int d : new int[] {32, 64, 256}) {
            check("decode d" + d, bf16, fp8, new Geometry(8, 4, d, 16), decode, true, -1, false, 0);
            check("prefill d" + d, bf16, fp8, new Geometry(8, 4, d, 16), prefill, true, -1, false, 0);
        }
        check("decode split 1 x 16k", bf16, fp8, llama, Batch.decode(1, 16384, 16384), true, -1, false, 0);
        check("decode 256, one of 9000 keys", bf16, fp8, llama, Batch.decode(256, 300, 9000), true, -1, false, 0);
        return results;
    }

    private void compare(String name, DType dt, DType poolDt, Geometry g, Batch b, boolean causal, int windowLeft,
                         boolean contextOnly, int maxKvBound) {
        AttentionCase c = build(dt, g, b, causal, windowLeft, contextOnly);
        String shape = "q" + g.qoHeads + "/kv" + g.kvHeads + " d" + g.headDim + " page" + g.pageSize + " "
                + (b.qLens.length > 8 ? b.qLens.length + " rows, kv " + b.kvLens[0] + " then " + b.kvLens[1]
                        : "q" + Arrays.toString(b.qLens).replace(" ", "") + " kv" + Arrays.toString(b.kvLens).replace(" ", ""));
        try (OnDevice gpu = new OnDevice(tw.gpu, c, dt, poolDt, maxKvBound);
             OnDevice cpu = new OnDevice(tw.cpu, c, dt, poolDt, maxKvBound)) {
            tw.cpu.ops().pagedAttention(cpu.q, cpu.pool, c.layer(), cpu.plan, cpu.out);
            Runnable gpuOp = () -> tw.gpu.ops().pagedAttention(gpu.q, gpu.pool, c.layer(), gpu.plan, gpu.out);
            gpuOp.run();
            double err = relErr(tw.cpu.toFloats(cpu.out), tw.gpu.toFloats(gpu.out));
            results.add(new CheckResult("attention " + name, shape, dt.toString(), err, Twin.tolerance(dt),
                    tw.median(gpuOp), "cpu"));
        }
    }

    /**
     * Decode as the launcher cuts it at both ends: one 16k-key sequence (66 slices per KV head, merged by the
     * block that finishes last), 256 sequences (no split), 256 sequences with one of 9000 keys (5 slices of the
     * longest length walked by 2 blocks per KV head; at 4-token pages the slice's page table limits it), and short sequences under a plan
     * bound of 16k keys, as a decode graph's leased plan has.
     */
    private void splitDecode(Geometry llama) {
        Batch longOne = Batch.decode(1, 16384, 16384);
        Batch wideWithLong = Batch.decode(256, 300, 9000);
        for (DType dt : List.of(DType.F32, DType.BF16)) {
            check("decode split 1 x 16k", dt, llama, longOne, true, -1, false, 0);
        }
        // fp32 at 515 keys would make a host pool of over 2 GB
        check("decode unsplit 256 x 260", DType.F32, llama, Batch.decode(256, 260, 260), true, -1, false, 0);
        check("decode unsplit 256 x 515", DType.BF16, llama, Batch.decode(256, 515, 515), true, -1, false, 0);
        check("decode 256, one of 9000 keys", DType.BF16, llama, wideWithLong, true, -1, false, 0);
        check("decode 256, one of 9000 keys, page4", DType.BF16, new Geometry(32, 8, 128, 4), wideWithLong,
                true, -1, false, 0);
        check("decode d64 group2, 256, one of 9000 keys", DType.F32, new Geometry(16, 8, 64, 16), wideWithLong,
                true, -1, false, 0);
        check("decode plan bound 16k", DType.BF16, llama, new Batch(new int[] {1, 1, 1}, new int[] {700, 5, 3000}),
                true, -1, false, 16384);
    }
}
