package org.mstar.device.cuda;

import static org.mstar.device.cuda.Elementwise.code;

import org.mstar.device.DType;
import org.mstar.device.MoeExpertsShape;
import org.mstar.device.MoeRouting;

/**
 * Launchers of the mixture-of-experts kernels (moe.cu): {@code moe_route}, then for the experts {@code moe_sort}
 * (assignments grouped by expert, each expert's first sorted place, the tile list) and the two products (gate/up with
 * SiLU·mul, down with the routing weights) one of five ways:
 * <ul>
 *   <li>bf16 with the widths multiples of 64 and at most 16 assignments an expert on average
 *       ({@link MoeTiles#grouped}; decode): tensor-core tiles that stream each chosen expert's weights once per tile
 *       of 8 or 16 of its assignments ({@code moe_skinny_*}), then {@code moe_combine};</li>
 *   <li>the same bf16 shapes with more assignments an expert (prefill, large decode batches): the grouped
 *       tensor-core GEMM ({@code moe_grouped_gate_up}, {@code moe_grouped_down}) over tiles of up to 64 of an
 *       expert's assignments, or 128 above 64 an expert on average ({@code _m128}), reading its weights once a
 *       tile, then {@code moe_combine};</li>
 *   <li>on Hopper ({@link org.mstar.device.KernelOptions#warpgroupMoe()}), the same bf16 shapes at more than 64
 *       assignments an expert on average: the grouped GEMM on the warpgroup products ({@code moe_wgmma_gate_up},
 *       {@code moe_wgmma_down}) over tiles of up to 128 assignments and 256 weight rows, then {@code moe_combine};</li>
 *   <li>the same bf16 shapes at {@link org.mstar.device.KernelOptions#moeGemmExpertRows()} rows an expert or more
 *       on average, outside graph capture: the experts' row counts read back to the host (one wait for the stream,
 *       {@code E + 1} ints),
 *       {@code moe_gather} into expert order, the gate/up GEMMs into bf16, {@code silu_mul}, the down GEMMs into fp32
 *       (cuBLAS: one strided batched GEMM over equal expert slots, or one GEMM per expert where the routing is
 *       uneven), then {@code moe_combine_sorted}. For prefill chunks, where cuBLAS's Hopper GEMMs outrun the mma.sync
 *       tiles by more than the wait costs ({@code --moe-perf} measures where);</li>
 *   <li>otherwise (fp32, odd widths, batch-invariant numerics): the grouped CUDA-core GEMMs {@code moe_gate_up} and
 *       {@code moe_down} over tiles of 16, then {@code moe_combine}.</li>
 * </ul>
 * Under expert parallelism {@code moe_local_ids} renumbers the router's ids for the device's experts first.
 * The tiled ways' launch sizes depend on the row count only, never on the routing, so they can be captured into a
 * graph. Every way rounds as {@link org.mstar.device.MoeOps#moeExperts} states. Bits: the grouped GEMM, in either form,
 * gives a row the same bits whatever the other rows and their routing, at any row count (each output element is the
 * same sequence of fp32 products over K); the warpgroup form's bits are not the mma.sync tiles'; the skinny tiles,
 * cuBLAS and the CUDA-core GEMMs each visit K in another order, so the ways' bits differ from one another within bf16
 * rounding, and a row crossing from one way to another (the batch growing past a threshold) may change in its last
 * bits.
 */
final class CudaMoe {
    /** kMoeMaxExperts, kMoeTileRows, kMoeGateUpCols, kMoeDownCols, kMoeThreads and kMoeSortThreads in moe.cu. */
    private static final int MAX_EXPERTS = 512;
    private static final int TILE_ROWS = 16;
    private static final int GATE_UP_COLS = 32;
    private static final int DOWN_COLS = 64;
    private static final int THREADS = 256;
    private static final int SORT_THREADS = 1024;
    /** A warp per row. */
    private static final int ROUTE_THREADS = 32;
    /** The skinny walk's 8 warps; it and the grouped GEMM consume K in chunks of 64. */
    private static final int SKINNY_THREADS = 256;
    private static final int SKINNY_K_MULTIPLE = 64;
    /**
     * How many times the rows the cuBLAS way's equal expert slots may hold before it runs a GEMM per expert instead
     * of one strided batched GEMM: routing about even (random, or a trained router over many rows) leaves the
     * largest run a little above the mean; a few crowded experts would make every slot that large.
     */
    private static final int SLOT_PADDING = 2;

    private final CudaDevice device;
    private final Elementwise elementwise;
    private final SharedOpState shared;

    CudaMoe(CudaDevice device, Elementwise elementwise, SharedOpState shared) {
        this.device = device;
        this.elementwise = elementwise;
        this.shared = shared;
    }

    void route(CudaTensor logits, MoeRouting routing, CudaTensor ids, CudaTensor weights) {
        int rows = routing.routedRows(logits, ids, weights);
        int experts = (int) logits.dim(-1);
        int k = routing.topK();
        requireExperts(experts, "moeRoute");
        if (rows == 0) {
            return;
        }
        device.enter();
        device.kernel("moe_route").launch(device.stream(), rows, 1, 1, ROUTE_THREADS, 0,
                new KernelArgs().tensor(logits).i32(experts).flag(routing.scoring() == MoeRouting.Scoring.SIGMOID).i32(k)
                        .flag(routing.normTopkProb()).i32(routing.numGroups()).i32(routing.topkGroups())
                        .f32(routing.routedScalingFactor()).tensor(ids).tensor(weights), "moeRoute");
    }

    /** @param routedExperts the router's experts, of which {@code gateUp} holds all or a slice */
    void experts(CudaTensor x, CudaTensor gateUp, CudaTensor down, CudaTensor ids, CudaTensor weights,
                 int routedExperts, CudaTensor out) {
        MoeExpertsShape shape = MoeExpertsShape.of(x, gateUp, down, ids, weights, out).ofRouted(routedExperts);
        requireExperts(shape.experts(), "moeExperts");
        if (shape.rows() == 0) {
            return;
        }
        device.enter();
        Way way = way(shape, x, gateUp, down, out);
        int tileRows = switch (way) {
            case SKINNY_TILES, GROUPED_GEMM -> MoeTiles.tileRows(shape.rows(), shape.topK(), shape.routedExperts());
            case WARPGROUP -> MoeTiles.WARPGROUP_ROWS;
            case CUDA_CORES, CUBLAS -> TILE_ROWS;
        };
        Sorted s = sort(shape, ids, tileRows);
        if (way == Way.CUBLAS) {
            cublas(shape, s, x, gateUp, down, ids, weights, out);
            return;
        }
        // the tiled ways' down products: fp32 [assignments, H], each at its assignment's place
        CudaTensor y = device.scratch("moe.y", DType.F32, s.assignments, shape.hidden());
        if (way == Way.SKINNY_TILES) {
            skinnyTiles(shape, s, x, gateUp, down, weights, y);
        } else if (way == Way.GROUPED_GEMM) {
            groupedGemm(shape, s, x, gateUp, down, weights, y);
        } else if (way == Way.WARPGROUP) {
            warpgroupGemm(shape, s, x, gateUp, down, weights, y);
        } else {
            cudaCores(shape, s, x, gateUp, down, weights, y, out.dtype());
        }
        elementwise.launch("moe_combine", (long) shape.rows() * shape.hidden() / combineRun(shape.hidden()),
                new KernelArgs().tensor(y).tensor(ids).i32(shape.experts()).tensor(out).i32(code(out))
                        .i64(shape.rows()).i32(shape.hidden()).i32(shape.topK()), "moeExperts combine");
    }

    /** How moeExperts computes the products (the class comment says when each applies). */
    enum Way {
        CUDA_CORES, SKINNY_TILES, GROUPED_GEMM, WARPGROUP, CUBLAS
    }

    Way way(MoeExpertsShape shape, CudaTensor x, CudaTensor gateUp, CudaTensor down, CudaTensor out) {
        boolean bf16 = x.dtype() == DType.BF16 && gateUp.dtype() == DType.BF16 && down.dtype() == DType.BF16
                && out.dtype() == DType.BF16 && x.alignedTo(16) && gateUp.alignedTo(16) && down.alignedTo(16);
        if (device.batchInvariant() || !bf16 || shape.hidden() % SKINNY_K_MULTIPLE != 0
                || shape.inter() % SKINNY_K_MULTIPLE != 0) {
            return Way.CUDA_CORES;
        }
        if (device.options().warpgroupMoe() && device.context().hasWarpgroupProducts()
                && MoeTiles.warpgroup(shape.rows(), shape.topK(), shape.routedExperts())) {
            return Way.WARPGROUP;
        }
        if ((long) shape.rows() * shape.topK() >= (long) device.options().moeGemmExpertRows() * shape.routedExperts()
                && !device.stream().capturing()) {
            return Way.CUBLAS;
        }
        return MoeTiles.grouped(shape.rows(), shape.topK(), shape.routedExperts()) ? Way.GROUPED_GEMM
                : Way.SKINNY_TILES;
    }

    /** moe_sort's outputs, and the tile size it listed them for. */
    private record Sorted(int tileRows, int assignments, int maxTiles, CudaTensor sorted, CudaTensor expertStart,
                          CudaTensor tileStart, CudaTensor tileExpert, CudaTensor tiles) {}

    private Sorted sort(MoeExpertsShape shape, CudaTensor ids, int tileRows) {
        int experts = shape.experts();
        int assignments = Math.toIntExact((long) shape.rows() * shape.topK());
        int maxTiles = MoeTiles.maxTiles(assignments, experts, tileRows);
        Sorted s = new Sorted(tileRows, assignments, maxTiles, device.scratch("moe.sorted", DType.I32, assignments),
                device.scratch("moe.expertStart", DType.I32, experts + 1L),
                device.scratch("moe.tileStart", DType.I32, maxTiles), device.scratch("moe.tileExpert", DType.I32, maxTiles),
                device.scratch("moe.tiles", DType.I32, 2));
        device.kernel("moe_sort").launch(device.stream(), 1, 1, 1, SORT_THREADS, 0, new KernelArgs().tensor(ids)
                .i32(assignments).i32(experts).i32(tileRows).tensor(s.sorted).tensor(s.expertStart).tensor(s.tileStart)
                .tensor(s.tileExpert).tensor(s.tiles), "moeExperts sort");
        return s;
    }

    /** The CUDA-core GEMMs, gate, up and the activation rounded to {@code hDtype} (out's) in h. */
    private void cudaCores(MoeExpertsShape shape, Sorted s, CudaTensor x, CudaTensor gateUp, CudaTensor down,
                           CudaTensor weights, CudaTensor y, DType hDtype) {
        int hidden = shape.hidden();
        int inter = shape.inter();
        CudaTensor h = device.scratch("moe.h", hDtype, s.assignments, inter);
        int gateUpTiles = (inter + GATE_UP_COLS - 1) / GATE_UP_COLS;
        device.kernel("moe_gate_up").launch(device.stream(), s.maxTiles * gateUpTiles, 1, 1, THREADS, 0,
                new KernelArgs().tensor(x).i32(code(x)).tensor(gateUp).i32(code(gateUp)).tensor(s.sorted)
                        .tensor(s.tileStart).tensor(s.tileExpert).tensor(s.tiles).tensor(h).i32(code(h))
                        .i32(shape.topK()).i32(hidden).i32(inter), "moeExperts gate/up");
        int downTiles = (hidden + DOWN_COLS - 1) / DOWN_COLS;
        device.kernel("moe_down").launch(device.stream(), s.maxTiles * downTiles, 1, 1, THREADS, 0,
                new KernelArgs().tensor(h).i32(code(h)).tensor(down).i32(code(down)).tensor(s.sorted)
                        .tensor(s.tileStart).tensor(s.tileExpert).tensor(s.tiles).tensor(weights).tensor(y)
                        .i32(hidden).i32(inter), "moeExperts down");
    }

    private void skinnyTiles(MoeExpertsShape shape, Sorted s, CudaTensor x, CudaTensor gateUp, CudaTensor down,
                             CudaTensor weights, CudaTensor y) {
        int hidden = shape.hidden();
        int inter = shape.inter();
        String size = s.tileRows == 8 ? "_m1" : "_m2";
        CudaTensor h = device.scratch("moe.h", DType.BF16, s.assignments, inter);
        device.stream().counters().gemm();
        device.kernel("moe_skinny_gate_up" + size).launch(device.stream(), s.maxTiles * ((inter + 7) / 8), 1, 1,
                SKINNY_THREADS, 0, new KernelArgs().tensor(x).tensor(gateUp).tensor(s.sorted).tensor(s.tileStart)
                        .tensor(s.tileExpert).tensor(s.tiles).tensor(h).i32(shape.topK()).i32(hidden).i32(inter),
                "moeExperts gate/up");
        device.stream().counters().gemm();
        device.kernel("moe_skinny_down" + size).launch(device.stream(), s.maxTiles * ((hidden + 15) / 16), 1, 1,
                SKINNY_THREADS, 0, new KernelArgs().tensor(h).tensor(down).tensor(s.sorted).tensor(s.tileStart)
                        .tensor(s.tileExpert).tensor(s.tiles).tensor(weights).tensor(y).i32(hidden).i32(inter),
                "moeExperts down");
    }

    private void groupedGemm(MoeExpertsShape shape, Sorted s, CudaTensor x, CudaTensor gateUp, CudaTensor down,
                             CudaTensor weights, CudaTensor y) {
        int hidden = shape.hidden();
        int inter = shape.inter();
        boolean large = s.tileRows == MoeTiles.GROUP_LARGE_ROWS;
        String size = large ? "_m128" : "";
        int threads = large ? MoeTiles.GROUP_LARGE_THREADS : MoeTiles.GROUP_THREADS;
        int smem = large ? MoeTiles.GROUP_LARGE_SMEM_BYTES : MoeTiles.GROUP_SMEM_BYTES;
        CudaTensor h = device.scratch("moe.h", DType.BF16, s.assignments, inter);
        device.stream().counters().gemm();
        device.kernel("moe_grouped_gate_up" + size).launch(device.stream(),
                MoeTiles.groupedGateUpBlocks(s.maxTiles, inter), 1, 1, threads, smem, new KernelArgs().tensor(x)
                        .tensor(gateUp).tensor(s.sorted).tensor(s.tileStart).tensor(s.tileExpert).tensor(s.tiles)
                        .tensor(h).i32(shape.topK()).i32(hidden).i32(inter), "moeExperts gate/up");
        device.stream().counters().gemm();
        device.kernel("moe_grouped_down" + size).launch(device.stream(), MoeTiles.groupedDownBlocks(s.maxTiles, hidden),
                1, 1, threads, smem, new KernelArgs().tensor(h).tensor(down).tensor(s.sorted).tensor(s.tileStart)
                        .tensor(s.tileExpert).tensor(s.tiles).tensor(weights).tensor(y).i32(hidden).i32(inter),
                "moeExperts down");
    }

    private void warpgroupGemm(MoeExpertsShape shape, Sorted s, CudaTensor x, CudaTensor gateUp, CudaTensor down,
                               CudaTensor weights, CudaTensor y) {
        int hidden = shape.hidden();
        int inter = shape.inter();
        CudaTensor h = device.scratch("moe.h", DType.BF16, s.assignments, inter);
        device.stream().counters().gemm();
        device.kernel("moe_wgmma_gate_up").launch(device.stream(), MoeTiles.warpgroupGateUpBlocks(s.maxTiles, inter),
                1, 1, MoeTiles.WARPGROUP_THREADS, MoeTiles.WARPGROUP_SMEM_BYTES, new KernelArgs().tensor(x)
                        .tensor(gateUp).tensor(s.sorted).tensor(s.tileStart).tensor(s.tileExpert).tensor(s.tiles)
                        .tensor(h).i32(shape.topK()).i32(hidden).i32(inter), "moeExperts gate/up");
        device.stream().counters().gemm();
        device.kernel("moe_wgmma_down").launch(device.stream(), MoeTiles.warpgroupDownBlocks(s.maxTiles, hidden), 1, 1,
                MoeTiles.WARPGROUP_THREADS, MoeTiles.WARPGROUP_SMEM_BYTES, new KernelArgs().tensor(h).tensor(down)
                        .tensor(s.sorted).tensor(s.tileStart).tensor(s.tileExpert).tensor(s.tiles).tensor(weights)
                        .tensor(y).i32(hidden).i32(inter), "moeExperts down");
    }

    /**
     * Reads the experts' first sorted places back (waiting for the stream), gathers the assignments' rows into expert
     * order, runs the experts' gate/up and down GEMMs over their runs of rows and combines from those rows. When equal
     * slots of the largest run's rows for every expert are at most {@link #SLOT_PADDING} times the rows, the runs go
     * into such slots and each product is one strided batched GEMM over all experts (a launch instead of one per
     * expert; the slots' spare rows are computed and never read); otherwise the runs lie back to back and each
     * expert with rows gets a GEMM of its own.
     */
    private void cublas(MoeExpertsShape shape, Sorted s, CudaTensor x, CudaTensor gateUp, CudaTensor down,
                        CudaTensor ids, CudaTensor weights, CudaTensor out) {
        int experts = shape.experts();
        int hidden = shape.hidden();
        int inter = shape.inter();
        int bf16 = CublasNative.R_16BF;
        int[] start = device.readIntsLater(s.expertStart).get();
        int slotRows = 0;
        for (int e = 0; e < experts; e++) {
            slotRows = Math.max(slotRows, start[e + 1] - start[e]);
        }
        int sorted = start[experts];
        boolean slots = slotRows > 0 && (long) experts * slotRows <= (long) SLOT_PADDING * sorted;
        int rows = slots ? experts * slotRows : s.assignments;
        CudaTensor xs = device.scratch("moe.xs", DType.BF16, rows, hidden);
        CudaTensor pos = device.scratch("moe.pos", DType.I32, s.assignments);
        CudaTensor gu = device.scratch("moe.gateUp", DType.BF16, rows, 2L * inter);
        CudaTensor h = device.scratch("moe.h", DType.BF16, rows, inter);
        CudaTensor ys = device.scratch("moe.ys", DType.F32, rows, hidden);
        elementwise.launch("moe_gather", (long) s.assignments * hidden / gatherPiece(x.dtype(), hidden),
                new KernelArgs().tensor(x).i32(code(x)).tensor(ids).tensor(s.sorted).tensor(s.expertStart)
                        .tensor(s.tiles).tensor(xs).tensor(pos).i64(s.assignments).i32(hidden).i32(shape.topK())
                        .i32(slots ? slotRows : 0), "moeExperts gather");
        Cublas cublas = shared.cublas();
        if (slots) {
            device.stream().counters().gemm();
            cublas.gemmRowsByWeightTBatched(xs, bf16, (long) slotRows * hidden, gateUp, bf16, 2L * inter * hidden, gu,
                    bf16, (long) slotRows * 2 * inter, slotRows, 2 * inter, hidden, experts);
        } else {
            for (int e = 0; e < experts; e++) {
                int n = start[e + 1] - start[e];
                if (n > 0) {
                    device.stream().counters().gemm();
                    cublas.gemmRowsByWeightT(rowsOf(xs, start[e], n), bf16, rowsOf(gateUp, e, 1), bf16,
                            rowsOf(gu, start[e], n), bf16, n, 2 * inter, hidden);
                }
            }
        }
        int used = slots ? rows : sorted;
        elementwise.launch("silu_mul", (long) used * inter, new KernelArgs().tensor(gu).i32(code(gu)).tensor(h)
                .i32(code(h)).i64(used).i32(inter), "moeExperts activation");
        if (slots) {
            device.stream().counters().gemm();
            cublas.gemmRowsByWeightTBatched(h, bf16, (long) slotRows * inter, down, bf16, (long) hidden * inter, ys,
                    CublasNative.R_32F, (long) slotRows * hidden, slotRows, hidden, inter, experts);
        } else {
            for (int e = 0; e < experts; e++) {
                int n = start[e + 1] - start[e];
                if (n > 0) {
                    device.stream().counters().gemm();
                    cublas.gemmRowsByWeightT(rowsOf(h, start[e], n), bf16, rowsOf(down, e, 1), bf16,
                            rowsOf(ys, start[e], n), CublasNative.R_32F, n, hidden, inter);
                }
            }
        }
        elementwise.launch("moe_combine_sorted", (long) shape.rows() * hidden / combineRun(hidden),
                new KernelArgs().tensor(ys).tensor(pos).tensor(ids).tensor(weights).i32(experts).tensor(out)
                        .i32(code(out)).i64(shape.rows()).i32(hidden).i32(shape.topK()), "moeExperts combine");
    }

    /** moe_combine_run: outputs a thread of moe_combine and moe_combine_sorted (16-byte loads of fp32 rows). */
    static int combineRun(int hidden) {
        return hidden % 4 == 0 ? 4 : 1;
    }

    /** moe_gather_piece: elements a thread of moe_gather copies (16 bytes where the rows are made of them). */
    static int gatherPiece(DType dtype, int hidden) {
        return switch (dtype) {
            case BF16, F16 -> hidden % 8 == 0 ? 8 : 1;
            case F32 -> hidden % 4 == 0 ? 4 : 1;
            default -> 1;
        };
    }

    private static CudaTensor rowsOf(CudaTensor t, int first, int rows) {
        return (CudaTensor) t.rows(first, rows);
    }

    void localIds(CudaTensor ids, int first, int count, CudaTensor local) {
        if (ids.numel() != local.numel()) {
            throw new IllegalArgumentException("moeLocalIds: " + ids.numel() + " ids into " + local.numel());
        }
        if (ids.numel() == 0) {
            return;
        }
        elementwise.launch("moe_local_ids", ids.numel(), new KernelArgs().tensor(ids).i32(first).i32(count)
                .tensor(local).i64(ids.numel()), "moeLocalIds");
    }

    private static void requireExperts(int experts, String op) {
        if (experts > MAX_EXPERTS) {
            throw new IllegalArgumentException(op + ": " + experts + " experts; the kernels hold at most " + MAX_EXPERTS
                    + " (kMoeMaxExperts in moe.cu)");
        }
    }
}
