package org.mstar.device.cuda;

import org.mstar.device.DType;
import org.mstar.device.Fp8Rows;
import org.mstar.device.Fp8Weight;
import org.mstar.device.Tensor;

/**
 * Products with FP8 weights ({@link Fp8Weight}), launching fp8_matmul.cu and fp8_tile_matmul.cu. Up to
 * {@link #SKINNY_ROWS} bf16 rows (decode), a kernel dequantises the codes in registers into the tensor cores' weight
 * fragments, so a step reads one byte a weight: fp8_skinny_matmul up to 16 rows, 16 weight rows a block, and
 * {@link Fp8TileMatmul} from {@value Fp8TileMatmul#MIN_ROWS}, 128 weight rows a block with x staged in shared memory;
 * more rows (prefill), or a product the kernels do not take, dequantise the weight into a
 * bf16 scratch and multiply it through {@link CudaMatmul} (cuBLAS), which at those rows is bound by its FLOPs, not
 * by the weight's bytes. Both paths multiply the same bf16 weights (code × scale rounded once). The scratch holds the
 * largest weight dequantised (the workspace keeps it). With the device's batch-invariant numerics on, every product
 * takes the scratch path, whose cuBLASLt GEMM does not depend on the row count.
 *
 * <p>A W8A8 weight ({@link Fp8Weight#quantisesActivations()}) multiplies its input quantised per row ({@link Fp8Rows},
 * given or quantised here by {@link CudaFp8Rows}). Above {@link #SKINNY_ROWS} rows its product is an FP8 × FP8 GEMM on
 * the tensor cores (twice bf16's rate on Hopper) through {@link CublasLt}, when the weight has one scale a row or one a
 * tensor (repeated a row here): cuBLASLt's plain FP8 product goes into an fp32 scratch (at most
 * {@value #EPILOGUE_SCRATCH_FLOATS} floats, the rows in slices) and an epilogue kernel applies the token and weight
 * scales and the bias and rounds once. On an H100 (2026-12-07) cuBLASLt's own outer-vector-scaled algorithm was 2e-3
 * off the exact product and slower than bf16 at Llama-3.1-8B's prefill shapes, where this form is exact and 1.0-1.6
 * times as fast as bf16. A 128 × 128 block-scaled weight, a shape cuBLASLt's FP8 GEMM does not take (K or N not a
 * multiple of 16, or no algorithm offered: a GPU without FP8), few rows, or batch-invariant numerics multiply the
 * input's rows dequantised to bf16 (its FP8 values, rounded once) on the weight-only paths above.
 */
final class CudaFp8Matmul {
    /** The most rows the decode kernels take; more go through the bf16 scratch and cuBLAS, or the FP8 GEMM. */
    static final int SKINNY_ROWS = Fp8TileMatmul.MAX_ROWS;
    private static final int THREADS = 256;
    /** Weight rows of one skinny block (its mma tile). */
    private static final int TILE_ROWS = 16;
    /** K elements a warp consumes at once (kFp8Chunk): K and the scale blocks' width are multiples of it. */
    private static final int CHUNK = 64;
    /** cuBLASLt's FP8 GEMM wants K, and the output's leading dimension, in multiples of 16. */
    private static final int FP8_GEMM_ALIGN = 16;
    /** The fp32 scratch of the FP8 GEMM's sums: 256 MiB, 2336 rows of Llama-3.1-8B's gate/up, 512 of its LM head. */
    static final int EPILOGUE_SCRATCH_FLOATS = 64 << 20;

    private final CudaDevice device;
    private final CudaMatmul dense;
    private final Elementwise elementwise;
    private final CudaFp8Rows rows;
    private final SharedOpState shared;
    private final Fp8TileMatmul tile;

    CudaFp8Matmul(CudaDevice device, CudaMatmul dense, Elementwise elementwise, CudaFp8Rows rows,
                  SharedOpState shared) {
        this.device = device;
        this.dense = dense;
        this.elementwise = elementwise;
        this.rows = rows;
        this.shared = shared;
        this.tile = new Fp8TileMatmul(device, elementwise);
    }

    /**
     * {@code out[rows, N] = x · dequantise(w)ᵀ + bias}, x F32 or BF16 (or {@link Fp8Rows} for a W8A8 weight, whose
     * other inputs are quantised first), out F32 or BF16, bias a float {@code [N]} or null.
     */
    void matmul(Tensor x, Fp8Weight w, CudaTensor bias, CudaTensor out) {
        long n = w.dim(0);
        long k = w.dim(1);
        if (x.numel() % k != 0 || out.numel() != x.numel() / k * n || (bias != null && bias.numel() != n)) {
            throw new IllegalArgumentException("matmul: x " + x + ", FP8 weight " + w + ", bias " + bias + " and out "
                    + out + " disagree");
        }
        if (x instanceof Fp8Rows && !w.quantisesActivations()) {
            throw new IllegalArgumentException("matmul: FP8 rows " + x + " multiply only a W8A8 weight, got " + w);
        }
        int m = Math.toIntExact(x.numel() / k);
        if (m == 0) {
            return;
        }
        if (!w.quantisesActivations()) {
            weightOnly(CudaTensor.of(x, "matmul x"), w, bias, out, m);
        } else if (gemmTakes(x, w, out, m)) {
            fp8Gemm(x, w, bias, out, m);
        } else {
            weightOnly(roundTrip(x, m, k), w, bias, out, m);
        }
    }

    /** The product of x and the weight's dequantised values, by a decode kernel or the bf16 scratch. */
    private void weightOnly(CudaTensor x, Fp8Weight w, CudaTensor bias, CudaTensor out, int m) {
        CudaTensor codes = (CudaTensor) w.codes();
        CudaTensor scales = (CudaTensor) w.scales();
        long n = w.dim(0);
        long k = w.dim(1);
        boolean decode = skinnyTakes(x, w, out, m);
        if (decode && m >= Fp8TileMatmul.MIN_ROWS) {
            tile.matmul(x, w, bias, out, m);
        } else if (decode) {
            boolean twoTiles = twoTiles(n, device.context().multiprocessors());
            long blockRows = twoTiles ? 2 * TILE_ROWS : TILE_ROWS;
            int blocks = Math.toIntExact((n + blockRows - 1) / blockRows);
            String kernel = "fp8_skinny_matmul_" + (m <= 8 ? "m1" : "m2") + (twoTiles ? "_r2" : "");
            device.stream().counters().gemm();
            device.kernel(kernel).launch(device.stream(), blocks, 1, 1, THREADS, 0, new KernelArgs()
                    .tensor(x).tensor(codes).tensor(scales).i32(w.blockRows())
                    .i32(w.blockCols()).tensor(bias).i32(bias == null ? 0 : Elementwise.code(bias)).tensor(out)
                    .i32(Elementwise.code(out)).i32(m).i32(Math.toIntExact(n)).i32(Math.toIntExact(k)), "matmul");
        } else {
            CudaTensor dequantised = device.scratch("matmul.fp8", DType.BF16, n, k);
            // a thread of fp8_dequantize_bf16 converts 16 codes where K and the blocks allow, else one
            long perThread = k % 16 == 0 && w.blockCols() % 16 == 0 ? 16 : 1;
            elementwise.launch("fp8_dequantize_bf16", n * k / perThread, new KernelArgs().tensor(codes)
                    .tensor(scales).i32(w.blockRows()).i32(w.blockCols()).tensor(dequantised)
                    .i32(Math.toIntExact(n)).i32(Math.toIntExact(k)), "matmul");
            dense.matmul(x, dequantised, bias, out);
        }
    }

    /**
     * Whether fp8_skinny_matmul gives a block two 16-row weight tiles (its _r2 kernels, the same bits): half the
     * blocks, each twice as long, so a block's fixed costs (its epilogue's sum over warps, its start) weigh half as
     * much; taken where the 32-row blocks still give every SM at least two, as the one resident block of m1_r2 (172
     * registers a thread) then has a next one to run.
     */
    static boolean twoTiles(long n, int sms) {
        return (n + 2 * TILE_ROWS - 1) / (2 * TILE_ROWS) >= 2L * sms;
    }

    /** The W8A8 input as bf16: FP8 rows dequantised, or x's rows quantised and dequantised in one pass. */
    private CudaTensor roundTrip(Tensor x, int m, long k) {
        CudaTensor bf16 = device.scratch("matmul.fp8.xbf16", DType.BF16, m, k);
        if (x instanceof Fp8Rows q) {
            rows.dequantize(q, bf16);
        } else {
            rows.quantize(CudaTensor.of(x, "matmul x"), device.scratch("matmul.fp8.xcodes", DType.U8, m, k),
                    device.scratch("matmul.fp8.xscales", DType.F32, m), bf16, "matmul");
        }
        return bf16;
    }

    /**
     * out = the FP8 × FP8 product through cuBLASLt into fp32, then scaled, biased and rounded by the epilogue, x
     * quantised here unless it came as FP8 rows.
     */
    private void fp8Gemm(Tensor x, Fp8Weight w, CudaTensor bias, CudaTensor out, int m) {
        int n = Math.toIntExact(w.dim(0));
        int k = Math.toIntExact(w.dim(1));
        CudaTensor xCodes;
        CudaTensor xScales;
        if (x instanceof Fp8Rows q) {
            xCodes = CudaTensor.of(q.codes(), "matmul x codes");
            xScales = CudaTensor.of(q.scales(), "matmul x scales");
        } else {
            xCodes = device.scratch("matmul.fp8.xcodes", DType.U8, m, k);
            xScales = device.scratch("matmul.fp8.xscales", DType.F32, m);
            rows.quantize(CudaTensor.of(x, "matmul x"), xCodes, xScales, null, "matmul");
        }
        CudaTensor wScales = (CudaTensor) w.scales();
        if (!w.scalesPerRow()) {
            CudaTensor perRow = device.scratch("matmul.fp8.wscales", DType.F32, n);
            rows.broadcastScale(wScales, perRow);
            wScales = perRow;
        }
        device.stream().counters().gemm();
        int slice = epilogueRows(m, n);
        for (int r = 0; r < m; r += slice) {
            int rowsHere = Math.min(slice, m - r);
            CudaTensor acc = device.scratch("matmul.fp8.acc", DType.F32, rowsHere, n);
            shared.cublasLt().fp8GemmRowsByWeightT(CudaTensor.of(xCodes.rows(r, rowsHere), "x codes"),
                    (CudaTensor) w.codes(), acc, rowsHere, n, k);
            elementwise.scaleBiasCast(acc, CudaTensor.of(xScales.rows(r, rowsHere), "x scales"), wScales, bias,
                    CudaTensor.of(out.rows(r, rowsHere), "matmul out"), rowsHere, n);
        }
    }

    /** Rows of one slice of the FP8 GEMM: as many of the m rows as the fp32 scratch holds, a multiple of 16. */
    static int epilogueRows(int m, int n) {
        int fit = Math.max(16, EPILOGUE_SCRATCH_FLOATS / n / 16 * 16);
        return Math.min(m, fit);
    }

    /**
     * Whether the FP8 GEMM computes this W8A8 product: more than {@link #SKINNY_ROWS} rows, no batch-invariant
     * numerics (cuBLASLt's FP8 algorithm is chosen per shape), one scale a weight row or one a tensor, K and N
     * multiples of 16, a BF16 or F32 output, 16-byte aligned codes and output, and cuBLASLt offering an algorithm
     * for the shape (a GPU with FP8 tensor cores).
     */
    private boolean gemmTakes(Tensor x, Fp8Weight w, CudaTensor out, int m) {
        boolean xAligned = !(x instanceof Fp8Rows q) || CudaTensor.of(q.codes(), "matmul x codes").alignedTo(16);
        return m > SKINNY_ROWS && !device.batchInvariant() && (w.scalesPerRow() || w.scalePerTensor())
                && w.dim(1) % FP8_GEMM_ALIGN == 0 && w.dim(0) % FP8_GEMM_ALIGN == 0
                && (out.dtype() == DType.BF16 || out.dtype() == DType.F32) && xAligned
                && ((CudaTensor) w.codes()).alignedTo(16) && out.alignedTo(16) && cublasLtTakes(m, w);
    }

    /** Whether cuBLASLt offers the FP8 product of every slice this product is cut into. */
    private boolean cublasLtTakes(int m, Fp8Weight w) {
        int n = Math.toIntExact(w.dim(0));
        int k = Math.toIntExact(w.dim(1));
        CublasLt lt = shared.cublasLt();
        int slice = epilogueRows(m, n);
        return lt.fp8GemmTakes(slice, n, k) && (m % slice == 0 || lt.fp8GemmTakes(m % slice, n, k));
    }

    /**
     * Whether a decode kernel (fp8_skinny_matmul, fp8_tile_matmul) computes this product: at most
     * {@link #SKINNY_ROWS} bf16 rows into a bf16 or fp32 output, K and the scale blocks' width multiples of 64,
     * 16-byte aligned x and codes, and no batch-invariant numerics (the kernel depends on the row count).
     */
    private boolean skinnyTakes(CudaTensor x, Fp8Weight w, CudaTensor out, int m) {
        CudaTensor codes = (CudaTensor) w.codes();
        return m <= SKINNY_ROWS && !device.batchInvariant() && x.dtype() == DType.BF16
                && (out.dtype() == DType.BF16 || out.dtype() == DType.F32) && w.dim(1) % CHUNK == 0
                && w.blockCols() % CHUNK == 0 && x.alignedTo(16) && codes.alignedTo(16);
    }
}
