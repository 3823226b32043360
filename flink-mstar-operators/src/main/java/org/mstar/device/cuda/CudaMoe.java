package org.mstar.device.cuda;

import static org.mstar.device.cuda.Elementwise.code;

import org.mstar.device.DType;
import org.mstar.device.MoeExpertsShape;
import org.mstar.device.MoeRouting;

/**
 * Launchers of the mixture-of-experts kernels (moe.cu): {@code moe_route}, then for the experts {@code moe_sort}
 * (assignments grouped by expert, the tile list), the grouped {@code moe_gate_up} GEMM with SiLU·mul in its epilogue,
 * the grouped {@code moe_down} GEMM with the routing weights in its epilogue, and {@code moe_combine}; and under expert
 * parallelism {@code moe_local_ids}. Launch sizes
 * depend on the row count only, never on the routing, so the ops can be captured into a graph.
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

    private final CudaDevice device;
    private final Elementwise elementwise;

    CudaMoe(CudaDevice device, Elementwise elementwise) {
        this.device = device;
        this.elementwise = elementwise;
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

    void experts(CudaTensor x, CudaTensor gateUp, CudaTensor down, CudaTensor ids, CudaTensor weights,
                 CudaTensor out) {
        MoeExpertsShape shape = MoeExpertsShape.of(x, gateUp, down, ids, weights, out);
        int experts = shape.experts();
        int inter = shape.inter();
        int hidden = shape.hidden();
        int k = shape.topK();
        long rows = shape.rows();
        requireExperts(experts, "moeExperts");
        if (rows == 0) {
            return;
        }
        int assignments = Math.toIntExact(rows * k);
        // every tile holds at least one assignment, and only an expert's last tile is partial
        int maxTiles = Math.min(assignments, (assignments + TILE_ROWS - 1) / TILE_ROWS + Math.min(experts, assignments));
        device.enter();
        CudaTensor sorted = device.scratch("moe.sorted", DType.I32, assignments);
        CudaTensor tileStart = device.scratch("moe.tileStart", DType.I32, maxTiles);
        CudaTensor tileExpert = device.scratch("moe.tileExpert", DType.I32, maxTiles);
        CudaTensor tiles = device.scratch("moe.tiles", DType.I32, 2);
        CudaTensor h = device.scratch("moe.h", out.dtype(), assignments, inter);
        CudaTensor y = device.scratch("moe.y", DType.F32, assignments, hidden);
        device.kernel("moe_sort").launch(device.stream(), 1, 1, 1, SORT_THREADS, 0, new KernelArgs().tensor(ids)
                .i32(assignments).i32(experts).tensor(sorted).tensor(tileStart).tensor(tileExpert).tensor(tiles),
                "moeExperts sort");
        int gateUpTiles = (inter + GATE_UP_COLS - 1) / GATE_UP_COLS;
        device.kernel("moe_gate_up").launch(device.stream(), maxTiles * gateUpTiles, 1, 1, THREADS, 0,
                new KernelArgs().tensor(x).i32(code(x)).tensor(gateUp).i32(code(gateUp)).tensor(sorted).tensor(tileStart)
                        .tensor(tileExpert).tensor(tiles).tensor(h).i32(code(h)).i32(k).i32(hidden).i32(inter),
                "moeExperts gate/up");
        int downTiles = (hidden + DOWN_COLS - 1) / DOWN_COLS;
        device.kernel("moe_down").launch(device.stream(), maxTiles * downTiles, 1, 1, THREADS, 0,
                new KernelArgs().tensor(h).i32(code(h)).tensor(down).i32(code(down)).tensor(sorted).tensor(tileStart)
                        .tensor(tileExpert).tensor(tiles).tensor(weights).tensor(y).i32(hidden).i32(inter),
                "moeExperts down");
        elementwise.launch("moe_combine", rows * hidden, new KernelArgs().tensor(y).tensor(ids).i32(experts).tensor(out)
                .i32(code(out)).i64(rows).i32(hidden).i32(k), "moeExperts combine");
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
