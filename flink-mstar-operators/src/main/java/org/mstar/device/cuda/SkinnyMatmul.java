package org.mstar.device.cuda;

import org.mstar.device.DType;
import org.mstar.device.KernelOptions;

/**
 * Launcher of skinny_matmul.cu: bf16 products of a few rows (decode steps) on the tensor cores with the
 * weights as the wide operand, so the launch is one stream over the weights. At one row it read a 4096 x 4096
 * weight at 3.2 TB/s where cuBLAS reached 2.65 (2026-12-02, H200; docs/results/2026-12-02/perf-decode.md has every shape, the large-K
 * down projections among them, where cuBLAS stays ahead). Within one instantiation (rows 1-8, 9-16, 17-32) a row's result does not depend on the
 * row count.
 */
final class SkinnyMatmul {
    private static final int THREADS = 256;
    /** K elements one warp consumes per group of mma steps; the kernel has no partial chunk. */
    private static final int K_MULTIPLE = 64;

    private final CudaDevice device;

    SkinnyMatmul(CudaDevice device) {
        this.device = device;
    }

    /**
     * Whether the kernel computes this product: bf16 operands, a float bias or none, a bf16 or fp32 output, at most
     * {@code maxRows} rows (a device's option, which stays within {@link KernelOptions#MAX_SKINNY_MATMUL_ROWS}, the
     * most any instantiation serves), K a multiple of 64 (so every row is 16-byte aligned when the first is) and
     * 16-byte aligned operands.
     */
    static boolean accepts(CudaTensor x, CudaTensor w, CudaTensor bias, CudaTensor out, long rows, long k,
                           int maxRows) {
        return rows <= maxRows && (bias == null || bias.dtype().isFloat()) && x.dtype() == DType.BF16
                && w.dtype() == DType.BF16 && (out.dtype() == DType.BF16 || out.dtype() == DType.F32)
                && k % K_MULTIPLE == 0 && x.alignedTo(16) && w.alignedTo(16);
    }

    /**
     * Whether the pipelined body serves a weight of {@code n} rows and {@code k} columns: it keeps a group of loads
     * in flight per warp but fits two blocks per SM instead of four, so it wins where its blocks still make one
     * wave at two per SM (a weight of few 16-row tiles), where K is long, and where there are many waves anyway and
     * K is not short; it loses where the plain kernel's four blocks per SM take all tiles in one wave and its two
     * would not. Measured per shape on an H200 (docs/results/2026-12-02/perf-table.md, "Pipelined skinny matmul"). Depends on the
     * shape only, so a row's result does not depend on the row count.
     */
    static boolean pipelined(int n, int k, int sms) {
        int tiles = (n + 15) / 16;
        return tiles <= 2 * sms || k >= 8192 || (tiles > 4 * sms && k >= 4096);
    }

    /**
     * {@code out[rows, n] = x · wᵀ + bias} (bias {@code [n]} or null), the bias added to the fp32 sum before its one
     * rounding to out's dtype, as cuBLAS into an fp32 accumulator followed by bias_add_cast rounds.
     */
    void matmul(CudaTensor x, CudaTensor w, CudaTensor bias, CudaTensor out, int rows, int n, int k) {
        launch(x, w, bias, out, rows, n, k, Activation.NONE, (n + 15) / 16);
    }

    /**
     * {@code out[rows, n / 2] = act(x · gateᵀ) · (x · upᵀ)} for a gate/up weight {@code w[n, k]} (gate rows, then up
     * rows), the activation applied in the kernel's epilogue to sums rounded to out's dtype: the same bits as
     * {@link #matmul} into an intermediate of out's dtype followed by the activation kernel, in one launch. The
     * kernel is chosen from the weight's shape as for {@link #matmul}, so each sum visits K in the same order.
     */
    void gated(CudaTensor x, CudaTensor w, CudaTensor out, int rows, int n, int k, Activation act) {
        launch(x, w, null, out, rows, n, k, act, (n / 2 + 7) / 8);
    }

    private void launch(CudaTensor x, CudaTensor w, CudaTensor bias, CudaTensor out, int rows, int n, int k,
                        Activation act, int blocks) {
        device.kernel(instantiation("skinny_matmul_bf16", rows, n, k)).launch(device.stream(), blocks, 1, 1, THREADS,
                0, new KernelArgs().tensor(x).tensor(w).tensor(out).i32(Elementwise.code(out)).tensor(bias)
                        .i32(bias == null ? 0 : Elementwise.code(bias)).i32(rows).i32(n).i32(k).i32(act.ordinal()),
                "matmul");
    }

    /**
     * The qkv projection {@code x · wᵀ} (w {@code [(qHeads + 2 kvHeads) · headDim, k]}, bf16 throughout) with RoPE
     * on every dim of q and k and the KV append in the epilogue: q into {@code q}, k and v into the pool slots
     * {@code pageIdx} / {@code offsets} of {@code layer} — the same bits as {@link #matmul} into a bf16 qkv
     * followed by qkv_rope_append, in one launch. {@code releaseAttention}: the next kernel may start its prologue
     * before this one ends (as qkv_rope_append's flag).
     */
    void qkvRope(CudaTensor x, CudaTensor w, int rows, int k, CudaTensor posIds, CudaTensor invFreq, CudaTensor q,
                 CudaTensor pool, CudaTensor pageIdx, CudaTensor offsets, int layer, int qHeads, int kvHeads,
                 int headDim, boolean interleave, boolean releaseAttention) {
        int n = (qHeads + 2 * kvHeads) * headDim;
        device.kernel(instantiation("skinny_qkv_rope_bf16", rows, n, k)).launch(device.stream(), n / 16, 1, 1, THREADS,
                0, new KernelArgs().tensor(x).tensor(w).i32(rows).i32(k).tensor(posIds).tensor(invFreq).tensor(q)
                        .tensor(pool).tensor(pageIdx).tensor(offsets).i32(layer).i32((int) pool.dim(1))
                        .i32((int) pool.dim(3)).i32(qHeads).i32(kvHeads).i32(headDim).flag(interleave)
                        .flag(releaseAttention), "qkvRope");
    }

    /** The kernel of a family for this many rows and this weight shape (the same for every family). */
    private String instantiation(String family, int rows, int n, int k) {
        String kernel = family + (rows <= 8 ? "_m1" : rows <= 16 ? "_m2" : "_m4");
        return rows <= 16 && pipelined(n, k, device.context().multiprocessors()) ? kernel + "_pipe" : kernel;
    }

    /** The epilogue's activation; the ordinals are SkinnyAct in skinny_matmul.cu. */
    enum Activation {
        NONE, SILU, GELU_TANH
    }
}
