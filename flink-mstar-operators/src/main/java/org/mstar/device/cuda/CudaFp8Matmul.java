package org.mstar.device.cuda;

import org.mstar.device.DType;
import org.mstar.device.Fp8Weight;

/**
 * Products with FP8 weights ({@link Fp8Weight}), launching fp8_matmul.cu. Up to {@link #SKINNY_ROWS} bf16 rows
 * (decode), fp8_skinny_matmul dequantises the codes in registers into the tensor cores' weight fragments, so a step
 * reads one byte a weight; more rows (prefill), or a product the kernel does not take, dequantise the weight into a
 * bf16 scratch and multiply it through {@link CudaMatmul} (cuBLAS), which at those rows is bound by its FLOPs, not
 * by the weight's bytes. Both paths multiply the same bf16 weights (code × scale rounded once). The scratch holds the
 * largest weight dequantised (the workspace keeps it). An FP8 × FP8 tensor-core GEMM through cuBLASLt would double prefill's
 * FLOP rate but quantises the activations as well; it is not used yet. With the device's batch-invariant numerics
 * on, every product takes the scratch path, whose cuBLASLt GEMM does not depend on the row count.
 */
final class CudaFp8Matmul {
    /** The most rows the skinny kernel takes; more go through the bf16 scratch and cuBLAS. */
    static final int SKINNY_ROWS = 64;
    private static final int THREADS = 256;
    /** Weight rows of one skinny block (its mma tile). */
    private static final int TILE_ROWS = 16;
    /** K elements a warp consumes at once (kFp8Chunk): K and the scale blocks' width are multiples of it. */
    private static final int CHUNK = 64;

    private final CudaDevice device;
    private final CudaMatmul dense;
    private final Elementwise elementwise;

    CudaFp8Matmul(CudaDevice device, CudaMatmul dense, Elementwise elementwise) {
        this.device = device;
        this.dense = dense;
        this.elementwise = elementwise;
    }

    /** {@code out[rows, N] = x · dequantise(w)ᵀ + bias}, x and out F32 or BF16, bias a float {@code [N]} or null. */
    void matmul(CudaTensor x, Fp8Weight w, CudaTensor bias, CudaTensor out) {
        CudaTensor codes = (CudaTensor) w.codes();
        CudaTensor scales = (CudaTensor) w.scales();
        long n = w.dim(0);
        long k = w.dim(1);
        if (x.numel() % k != 0 || out.numel() != x.numel() / k * n || (bias != null && bias.numel() != n)) {
            throw new IllegalArgumentException("matmul: x " + x + ", FP8 weight " + w + ", bias " + bias + " and out "
                    + out + " disagree");
        }
        int rows = Math.toIntExact(x.numel() / k);
        if (rows == 0) {
            return;
        }
        if (skinnyTakes(x, w, out, rows)) {
            int blocks = Math.toIntExact((n + TILE_ROWS - 1) / TILE_ROWS);
            String kernel = "fp8_skinny_matmul_" + (rows <= 8 ? "m1" : rows <= 16 ? "m2" : rows <= 32 ? "m4" : "m8");
            device.stream().counters().gemm();
            device.kernel(kernel).launch(device.stream(), blocks, 1, 1, THREADS, 0, new KernelArgs()
                    .tensor(x).tensor(codes).tensor(scales).i32(w.blockRows())
                    .i32(w.blockCols()).tensor(bias).i32(bias == null ? 0 : Elementwise.code(bias)).tensor(out)
                    .i32(Elementwise.code(out)).i32(rows).i32(Math.toIntExact(n)).i32(Math.toIntExact(k)), "matmul");
            return;
        }
        CudaTensor dequantised = device.scratch("matmul.fp8", DType.BF16, n, k);
        // a thread of fp8_dequantize_bf16 converts 16 codes where K and the blocks allow, else one
        long perThread = k % 16 == 0 && w.blockCols() % 16 == 0 ? 16 : 1;
        elementwise.launch("fp8_dequantize_bf16", n * k / perThread, new KernelArgs().tensor(codes).tensor(scales)
                .i32(w.blockRows()).i32(w.blockCols()).tensor(dequantised).i32(Math.toIntExact(n))
                .i32(Math.toIntExact(k)), "matmul");
        dense.matmul(x, dequantised, bias, out);
    }

    /**
     * Whether fp8_skinny_matmul computes this product: at most {@link #SKINNY_ROWS} bf16 rows into a bf16 or fp32
     * output, K and the scale blocks' width multiples of 64, 16-byte aligned x and codes, and no batch-invariant
     * numerics (the instantiation depends on the row count).
     */
    private boolean skinnyTakes(CudaTensor x, Fp8Weight w, CudaTensor out, int rows) {
        CudaTensor codes = (CudaTensor) w.codes();
        return rows <= SKINNY_ROWS && !device.batchInvariant() && x.dtype() == DType.BF16
                && (out.dtype() == DType.BF16 || out.dtype() == DType.F32) && w.dim(1) % CHUNK == 0
                && w.blockCols() % CHUNK == 0 && x.alignedTo(16) && codes.alignedTo(16);
    }
}
