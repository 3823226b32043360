package org.mstar.device.cuda;

import org.mstar.device.DType;

/** Launchers of the elementwise kernels (elementwise.cu), shared by several ops. */
final class Elementwise {
    private static final int THREADS = 256;

    private final CudaDevice device;
    private final int maxBlocks;

    Elementwise(CudaDevice device) {
        this.device = device;
        this.maxBlocks = device.context().multiprocessors() * 16;
    }

    /** Blocks for a grid-stride loop over n elements: enough to fill the GPU, never more than the work. */
    int blocksFor(long n) {
        return (int) Math.max(1, Math.min(maxBlocks, (n + THREADS - 1) / THREADS));
    }

    void launch(String kernel, long n, KernelArgs args, String op) {
        if (n == 0) {
            return;
        }
        device.kernel(kernel).launch(device.stream(), blocksFor(n), 1, 1, THREADS, 0, args, op);
    }

    void convert(CudaTensor in, CudaTensor out) {
        launch("convert_elements", in.numel(), new KernelArgs().tensor(in).i32(code(in)).tensor(out).i32(code(out))
                .i64(in.numel()), "convert");
    }

    void biasAddCast(CudaTensor acc, CudaTensor bias, CudaTensor out, long rows, long cols) {
        scaleBiasCast(acc, null, null, bias, out, rows, cols);
    }

    /**
     * {@code out[r, c] = acc[r, c] · rowScales[r] · colScales[c] + bias[c]} rounded once to out's dtype, each of the
     * scales and the bias left out where null: an fp32 accumulator's epilogue.
     */
    void scaleBiasCast(CudaTensor acc, CudaTensor rowScales, CudaTensor colScales, CudaTensor bias, CudaTensor out,
                       long rows, long cols) {
        launch("bias_add_cast", rows * cols, new KernelArgs().tensor(acc).tensor(rowScales).tensor(colScales).tensor(bias)
                .i32(bias == null ? 0 : code(bias)).tensor(out).i32(code(out)).i64(rows).i32(Math.toIntExact(cols)),
                "matmul bias");
    }

    /** The dtype code the kernels switch on (DType ordinal), for float tensors only. */
    static int code(CudaTensor t) {
        if (!t.dtype().isFloat()) {
            throw new IllegalArgumentException("expected a float tensor, got " + t);
        }
        return t.dtype().ordinal();
    }

    /** The dtype code of a KV pool the kernels write: a float type, or E4M3 codes quantised on write. */
    static int poolCode(CudaTensor pool) {
        if (pool.dtype() == DType.F8_E4M3) {
            return pool.dtype().ordinal();
        }
        return code(pool);
    }
}
