package org.mstar.device.cuda;

import org.mstar.device.DType;
import org.mstar.device.Fp8Weight;

/**
 * Launcher of fp8_tile_matmul.cu: products of {@value #MIN_ROWS} to {@value #MAX_ROWS} bf16 rows (decode at larger
 * batches) with FP8 weights, a block of {@value #COLUMNS} output columns against every row of x over one slice of K,
 * x and the codes staged in shared memory, so x crosses L2 once per {@value #COLUMNS} columns instead of once per 16
 * as in fp8_skinny_matmul. The slices' partial sums are added in slice order by fp8_tile_reduce. The split depends on
 * the weight's shape and the SM count only, so a row's result does not depend on the row count.
 */
final class Fp8TileMatmul {
    /** The fewest rows the kernel takes; fewer go to fp8_skinny_matmul. */
    static final int MIN_ROWS = 17;
    /** Eight 8-row tiles of x in the larger instantiation. */
    static final int MAX_ROWS = 64;
    /** Four warps, kTileWarps. */
    static final int WARPS = 4;
    /** Weight rows (output columns) of a block, kTileRows: 32 a warp. */
    static final int COLUMNS = 32 * WARPS;
    /** K elements of a shared-memory stage, kTileChunk. */
    static final int CHUNK = 64;
    /** Shared-memory stages, kTileStages. */
    static final int STAGES = 4;
    /** Bytes of a staged x row, kTileXPitch. */
    private static final int X_PITCH = 2 * CHUNK + 16;
    /**
     * Blocks an SM is given for the split: three would fit at 64 rows (144-156 registers a thread, 68 KiB of shared
     * memory); two is the choice until a GPU run compares them (more slices add partial sums to reduce).
     */
    private static final int BLOCKS_PER_SM = 2;
    /** Each slice beyond the first writes and reads back an fp32 [rows, N] partial: a few at most. */
    private static final int MAX_SPLITS = 8;
    /** The fewest 64-element chunks a slice keeps, so its pipeline fills. */
    private static final int MIN_SLICE_CHUNKS = 4;

    private final CudaDevice device;
    private final Elementwise elementwise;

    Fp8TileMatmul(CudaDevice device, Elementwise elementwise) {
        this.device = device;
        this.elementwise = elementwise;
    }

    /**
     * The slices of K for a weight of {@code n} rows and {@code k} columns: as many as keep {@value #BLOCKS_PER_SM}
     * blocks an SM busy (rounded down: a part-filled second round of blocks costs a whole one), within
     * {@value #MAX_SPLITS} and {@value #MIN_SLICE_CHUNKS} chunks a slice.
     */
    static int splits(int n, int k, int sms) {
        int columnBlocks = (n + COLUMNS - 1) / COLUMNS;
        int wanted = BLOCKS_PER_SM * sms / columnBlocks;
        int most = Math.min(MAX_SPLITS, k / CHUNK / MIN_SLICE_CHUNKS);
        return Math.max(1, Math.min(wanted, most));
    }

    /**
     * {@code out[m, N] = x · dequantise(w)ᵀ + bias} for {@value #MIN_ROWS} ≤ m ≤ {@value #MAX_ROWS}, under the
     * conditions of fp8_skinny_matmul (CudaFp8Matmul checks them).
     */
    void matmul(CudaTensor x, Fp8Weight w, CudaTensor bias, CudaTensor out, int m) {
        int n = Math.toIntExact(w.dim(0));
        int k = Math.toIntExact(w.dim(1));
        int splits = splits(n, k, device.context().multiprocessors());
        int xTiles = m <= 32 ? 4 : 8;
        CudaTensor partial = splits == 1 ? null : device.scratch("matmul.fp8.partial", DType.F32, splits, m, n);
        int smem = STAGES * (COLUMNS * CHUNK + xTiles * 8 * X_PITCH);
        device.stream().counters().gemm();
        device.kernel("fp8_tile_matmul_m" + xTiles).launch(device.stream(), (n + COLUMNS - 1) / COLUMNS, splits, 1,
                32 * WARPS, smem, new KernelArgs().tensor(x).tensor((CudaTensor) w.codes())
                        .tensor((CudaTensor) w.scales()).i32(w.blockRows()).i32(w.blockCols()).tensor(bias)
                        .i32(bias == null ? 0 : Elementwise.code(bias)).tensor(out).i32(Elementwise.code(out))
                        .tensor(partial).i32(m).i32(n).i32(k), "matmul");
        if (partial != null) {
            elementwise.launch("fp8_tile_reduce", (long) m * n, new KernelArgs().tensor(partial).i32(splits)
                    .tensor(bias).i32(bias == null ? 0 : Elementwise.code(bias)).tensor(out)
                    .i32(Elementwise.code(out)).i32(m).i32(n), "matmul");
        }
    }
}
