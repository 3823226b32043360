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
 * @param moeGemmExpertRows mixture-of-experts layers whose experts get at least this many rows each on average
 *                          (rows × top-k / the router's experts; 0 for every layer) run their experts' bf16 products on
 *                          cuBLAS GEMMs over each expert's rows (the experts' row counts read back to the host first),
 *                          fewer on tensor-core tiles (skinny tiles at few assignments an expert, the grouped GEMM at
 *                          more) that read nothing back; a step being recorded into a CUDA graph always takes the
 *                          tiles
 * @param warpgroupMoe the mixture-of-experts grouped GEMM over tiles of 128 assignments (more than 64 an expert on
 *                     average) runs on Hopper's asynchronous warpgroup products (the default, on sm_90 devices; it then
 *                     also serves where {@code moeGemmExpertRows} would take cuBLAS) instead of the mma.sync tiles;
 *                     the GPU harness switches it off to measure the one against the other
 * @param warpgroupAttention bf16 prefill attention at head dims 128 and 192 (paged and ragged) runs on Hopper's
 *                           warpgroup products (on sm_90 devices, unless {@code batchInvariant}: its key tiles are
 *                           wider than the decode kernel's, so a row's sums differ in order) instead of the mma.sync
 *                           kernel. Off by default until the kernel has been checked and timed on a GPU (it has run
 *                           only under the host emulation so far); the GPU harness turns it on to check and measure it
 * @param batchInvariant a row's results are independent of the other rows of its step: on a GPU, matmuls through
 *                       split-free cuBLASLt algorithms and bf16 attention at the tensor-core head dims through one
 *                       kernel for prefill and decode rows alike. A request's tokens then do not depend on what it
 *                       was batched or chunked with, so a request recomputed after a restore continues exactly as
 *                       the lost run would have. Off (the default), decode rows use the split-KV decode kernel and
 *                       cuBLAS picks its algorithms freely: faster decode, with tokens that can change when the
 *                       batching does. fp32 and head dim 32 have no invariant attention path. The CPU reference is
 *                       invariant either way ({@link Device#batchInvariant()}), but for latent (MLA) attention, whose step
 *                       takes its prefill form (up-projected keys) or the latent one by its keys per query row unless
 *                       this is on, on the CPU too.
 */
public record KernelOptions(boolean tensorCorePrefill, boolean programmaticLaunch, boolean qkvRopeInMatmul,
                            int skinnyMatmulRows, int moeGemmExpertRows, boolean warpgroupMoe,
                            boolean warpgroupAttention, boolean batchInvariant) {
    /** Rows up to which bf16 matmuls take the skinny kernel by default (measured, docs/results/perf.md). */
    public static final int DEFAULT_SKINNY_MATMUL_ROWS = 16;
    /** Most rows the skinny-matmul kernel serves: four 8-row tiles of x in its largest instantiation. */
    public static final int MAX_SKINNY_MATMUL_ROWS = 32;

    /**
     * Mean rows an expert from which mixture-of-experts layers run their experts on cuBLAS GEMMs by default. Measured
     * on an H100 (GPU harness {@code --moe-perf}, 2026-12-07): one layer's experts alone were faster on cuBLAS from 96
     * rows an expert (DeepSeek-V2-Lite at 1024 rows: 0.65 against 0.79 ms; at 2048, 192 an expert: 0.81 against 1.30),
     * but in the engine's 2048-token Qwen3-30B-A3B prefill (128 an expert) cuBLAS's read-back cost more than its
     * 0.13 ms a layer gain (22.2 against 20.6 ms for 12 layers): the wait empties the launch queue.
     */
    public static final int DEFAULT_MOE_GEMM_EXPERT_ROWS = 160;

    private static final KernelOptions DEFAULTS = new KernelOptions(true, true, true, DEFAULT_SKINNY_MATMUL_ROWS,
            DEFAULT_MOE_GEMM_EXPERT_ROWS, true, false, false);

    /**
     * @throws IllegalArgumentException when {@code skinnyMatmulRows} is outside 0..{@value #MAX_SKINNY_MATMUL_ROWS}
     *     or {@code moeGemmExpertRows} is negative
     */
    public KernelOptions {
        if (skinnyMatmulRows < 0 || skinnyMatmulRows > MAX_SKINNY_MATMUL_ROWS) {
            throw new IllegalArgumentException("skinny matmul rows must be 0.." + MAX_SKINNY_MATMUL_ROWS + ", got "
                    + skinnyMatmulRows);
        }
        if (moeGemmExpertRows < 0) {
            throw new IllegalArgumentException("MoE GEMM rows an expert must be at least 0, got " + moeGemmExpertRows);
        }
    }

    /** Every variant at its default: tensor-core prefill, programmatic launch, RoPE in the qkv matmul, skinny
     *  matmuls up to {@value #DEFAULT_SKINNY_MATMUL_ROWS} rows, MoE experts on cuBLAS from
     *  {@value #DEFAULT_MOE_GEMM_EXPERT_ROWS} rows an expert unless the warpgroup GEMM serves, mma.sync prefill
     *  attention, batch invariance off. */
    public static KernelOptions defaults() {
        return DEFAULTS;
    }

    public KernelOptions withTensorCorePrefill(boolean on) {
        return new KernelOptions(on, programmaticLaunch, qkvRopeInMatmul, skinnyMatmulRows, moeGemmExpertRows,
                warpgroupMoe, warpgroupAttention, batchInvariant);
    }

    public KernelOptions withProgrammaticLaunch(boolean on) {
        return new KernelOptions(tensorCorePrefill, on, qkvRopeInMatmul, skinnyMatmulRows, moeGemmExpertRows,
                warpgroupMoe, warpgroupAttention, batchInvariant);
    }

    public KernelOptions withQkvRopeInMatmul(boolean on) {
        return new KernelOptions(tensorCorePrefill, programmaticLaunch, on, skinnyMatmulRows, moeGemmExpertRows,
                warpgroupMoe, warpgroupAttention, batchInvariant);
    }

    public KernelOptions withSkinnyMatmulRows(int rows) {
        return new KernelOptions(tensorCorePrefill, programmaticLaunch, qkvRopeInMatmul, rows, moeGemmExpertRows,
                warpgroupMoe, warpgroupAttention, batchInvariant);
    }

    public KernelOptions withMoeGemmExpertRows(int rows) {
        return new KernelOptions(tensorCorePrefill, programmaticLaunch, qkvRopeInMatmul, skinnyMatmulRows, rows,
                warpgroupMoe, warpgroupAttention, batchInvariant);
    }

    public KernelOptions withWarpgroupMoe(boolean on) {
        return new KernelOptions(tensorCorePrefill, programmaticLaunch, qkvRopeInMatmul, skinnyMatmulRows,
                moeGemmExpertRows, on, warpgroupAttention, batchInvariant);
    }

    public KernelOptions withBatchInvariant(boolean on) {
        return new KernelOptions(tensorCorePrefill, programmaticLaunch, qkvRopeInMatmul, skinnyMatmulRows, moeGemmExpertRows,
                warpgroupMoe, warpgroupAttention, on);
    }

    public KernelOptions withWarpgroupAttention(boolean on) {
        return new KernelOptions(tensorCorePrefill, programmaticLaunch, qkvRopeInMatmul, skinnyMatmulRows,
                moeGemmExpertRows, warpgroupMoe, on, batchInvariant);
    }
}
