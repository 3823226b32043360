package org.mstar.device;

/**
 * Which kernel variants a device computes with, fixed when the device is built ({@link Device#options()}); a view
 * of the device with other options ({@link Device#withOptions}) runs other variants on the same tensors. Only
 * {@link #batchInvariant} means something on every device; the others choose between CUDA kernels, and the CPU
 * reference, which has one way to compute each op, ignores them. One record rather than a neutral part and a CUDA
 * part, so that a device's variants are read and changed in one place whatever the device.
 *
 * @param tensorCorePrefill bf16 prefill attention on the tensor cores (the default), or on the CUDA-core kernel that
 *                          fp32 uses; the GPU harness switches it off to measure the one against the other
 * @param programmaticLaunch CUDA graphs launch the project's kernels programmatically (the default; see
 *                           {@code CudaGraph}) or in plain stream order; a graph keeps the launch it was captured
 *                           with
 * @param qkvRopeInMatmul the qkv projection of a few rows rotates q and k and appends k and v to the pool in the
 *                        skinny matmul's epilogue (the default) instead of a qkv_rope_append launch after it: the
 *                        same bits, one launch a layer fewer (docs/architecture/decode-fusions.md)
 * @param skinnyMatmulRows bf16 matmuls of at most this many rows (decode steps; 0 for none) run on the skinny-matmul
 *                         kernel instead of cuBLAS
 * @param moeGemmRows mixture-of-experts layers of at least this many rows run their experts' bf16 products on
 *                    cuBLAS GEMMs over each expert's rows (the experts' row counts read back to the host first), fewer
 *                    rows on tensor-core tiles (skinny tiles at few assignments an expert, the grouped GEMM at more)
 *                    that read nothing back; a step being recorded into a CUDA graph always takes the tiles
 * @param batchInvariant a row's results are independent of the other rows of its step: on a GPU, matmuls through
 *                       split-free cuBLASLt algorithms and bf16 attention at the tensor-core head dims through one
 *                       kernel for prefill and decode rows alike. A request's tokens then do not depend on what it
 *                       was batched or chunked with, so a request recomputed after a restore continues exactly as
 *                       the lost run would have. Off (the default), decode rows use the split-KV decode kernel and
 *                       cuBLAS picks its algorithms freely: faster decode, with tokens that can change when the
 *                       batching does. fp32 and head dim 32 have no invariant attention path. The CPU reference is
 *                       invariant either way ({@link Device#batchInvariant()}).
 */
public record KernelOptions(boolean tensorCorePrefill, boolean programmaticLaunch, boolean qkvRopeInMatmul,
                            int skinnyMatmulRows, int moeGemmRows, boolean batchInvariant) {
    /** Rows up to which bf16 matmuls take the skinny kernel by default (measured, docs/results/perf.md). */
    public static final int DEFAULT_SKINNY_MATMUL_ROWS = 16;
    /** Most rows the skinny-matmul kernel serves: four 8-row tiles of x in its largest instantiation. */
    public static final int MAX_SKINNY_MATMUL_ROWS = 32;

    /**
     * Rows from which mixture-of-experts layers run their experts on cuBLAS GEMMs by default: below it the grouped
     * tensor-core GEMM serves prefill chunks with nothing read back; from it (256 rows an expert of Qwen3-30B-A3B)
     * cuBLAS's GEMMs may gain more than the read-back costs. Not yet measured on a GPU; the GPU harness's
     * {@code --moe-perf} sweeps it.
     */
    public static final int DEFAULT_MOE_GEMM_ROWS = 4096;

    private static final KernelOptions DEFAULTS = new KernelOptions(true, true, true, DEFAULT_SKINNY_MATMUL_ROWS,
            DEFAULT_MOE_GEMM_ROWS, false);

    /**
     * @throws IllegalArgumentException when {@code skinnyMatmulRows} is outside 0..{@value #MAX_SKINNY_MATMUL_ROWS}
     *     or {@code moeGemmRows} is below 1
     */
    public KernelOptions {
        if (skinnyMatmulRows < 0 || skinnyMatmulRows > MAX_SKINNY_MATMUL_ROWS) {
            throw new IllegalArgumentException("skinny matmul rows must be 0.." + MAX_SKINNY_MATMUL_ROWS + ", got "
                    + skinnyMatmulRows);
        }
        if (moeGemmRows < 1) {
            throw new IllegalArgumentException("MoE GEMM rows must be at least 1, got " + moeGemmRows);
        }
    }

    /** Every variant at its default: tensor-core prefill, programmatic launch, RoPE in the qkv matmul, skinny
     *  matmuls up to {@value #DEFAULT_SKINNY_MATMUL_ROWS} rows, MoE experts on cuBLAS from
     *  {@value #DEFAULT_MOE_GEMM_ROWS} rows, batch invariance off. */
    public static KernelOptions defaults() {
        return DEFAULTS;
    }

    public KernelOptions withTensorCorePrefill(boolean on) {
        return new KernelOptions(on, programmaticLaunch, qkvRopeInMatmul, skinnyMatmulRows, moeGemmRows, batchInvariant);
    }

    public KernelOptions withProgrammaticLaunch(boolean on) {
        return new KernelOptions(tensorCorePrefill, on, qkvRopeInMatmul, skinnyMatmulRows, moeGemmRows, batchInvariant);
    }

    public KernelOptions withQkvRopeInMatmul(boolean on) {
        return new KernelOptions(tensorCorePrefill, programmaticLaunch, on, skinnyMatmulRows, moeGemmRows, batchInvariant);
    }

    public KernelOptions withSkinnyMatmulRows(int rows) {
        return new KernelOptions(tensorCorePrefill, programmaticLaunch, qkvRopeInMatmul, rows, moeGemmRows, batchInvariant);
    }

    public KernelOptions withMoeGemmRows(int rows) {
        return new KernelOptions(tensorCorePrefill, programmaticLaunch, qkvRopeInMatmul, skinnyMatmulRows, rows,
                batchInvariant);
    }

    public KernelOptions withBatchInvariant(boolean on) {
        return new KernelOptions(tensorCorePrefill, programmaticLaunch, qkvRopeInMatmul, skinnyMatmulRows, moeGemmRows, on);
    }
}
