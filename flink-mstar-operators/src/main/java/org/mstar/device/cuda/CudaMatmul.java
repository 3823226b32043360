package org.mstar.device.cuda;

import org.mstar.device.DType;

/**
 * Dense projections through cuBLAS (fp32 accumulation). Same-dtype operands go straight to cublasGemmEx;
 * mixed operand dtypes are widened to fp32 first (exact, but a slow path meant for checks). A bias, or an
 * output dtype cuBLAS cannot write for the operand type, goes through an fp32 accumulator and one
 * rounding kernel, so the result is rounded once, as the contract asks. bf16 products of few rows (decode
 * steps, up to the device's {@link org.mstar.device.KernelOptions#skinnyMatmulRows()}) go to {@link SkinnyMatmul}: decode steps of 1-16
 * requests ran 3-10 % faster with it than on cuBLAS (docs/results/2026-12-02/perf-decode.md). With the device's batch-invariant numerics on, every GEMM goes through
 * {@link CublasLt}, whose algorithms never split K: a row's result must not depend on whether its step had few
 * rows or many.
 */
final class CudaMatmul {
    private final CudaDevice device;
    private final Elementwise elementwise;
    private final SkinnyMatmul skinny;
    private final SharedOpState shared;

    CudaMatmul(CudaDevice device, Elementwise elementwise, SharedOpState shared) {
        this.device = device;
        this.elementwise = elementwise;
        this.skinny = new SkinnyMatmul(device);
        this.shared = shared;
    }

    /** The cuBLAS library and version in use (loads it). */
    String describe() {
        return Cublas.load() + " version " + shared.cublas().version()
                + (device.batchInvariant() ? ", " + CublasLt.load() + " for batch-invariant matmuls" : "");
    }

    void matmul(CudaTensor x, CudaTensor w, CudaTensor bias, CudaTensor out) {
        if (w.rank() != 2) {
            throw new IllegalArgumentException("matmul: w must be [N, K], got " + w);
        }
        long n = w.dim(0);
        long k = w.dim(1);
        if (x.numel() % k != 0) {
            throw new IllegalArgumentException("matmul: x " + x + " is not a multiple of K=" + k);
        }
        long rows = x.numel() / k;
        if (out.numel() != rows * n) {
            throw new IllegalArgumentException("matmul: out " + out + " must hold " + rows + "x" + n);
        }
        if (bias != null && bias.numel() != n) {
            throw new IllegalArgumentException("matmul: bias " + bias + " must have " + n + " elements");
        }
        if (rows == 0) {
            return;
        }
        if (skinnyTakes(x, w, bias, out, rows, k)) {
            device.stream().counters().gemm();
            skinny.matmul(x, w, bias, out, Math.toIntExact(rows), Math.toIntExact(n), Math.toIntExact(k));
            return;
        }
        CudaTensor a = x;
        CudaTensor b = w;
        if (x.dtype() != w.dtype()) {
            a = widened("matmul.x", x);
            b = widened("matmul.w", w);
        }
        int opType = cudaType(b.dtype());
        boolean direct = bias == null && (out.dtype() == b.dtype() || out.dtype() == DType.F32);
        CudaTensor c = direct ? out : device.scratch("matmul.acc", DType.F32, rows, n);
        device.stream().counters().gemm();
        if (device.batchInvariant()) {
            shared.cublasLt().gemmRowsByWeightT(a, b, c, Math.toIntExact(rows), Math.toIntExact(n), Math.toIntExact(k));
        } else {
            shared.cublas().gemmRowsByWeightT(a, opType, b, opType, c, cudaType(c.dtype()), Math.toIntExact(rows),
                    Math.toIntExact(n), Math.toIntExact(k));
        }
        if (!direct) {
            elementwise.biasAddCast(c, bias, out, rows, n);
        }
    }

    /**
     * The gate/up projection with its activation in one skinny launch ({@link SkinnyMatmul#gated}) when the skinny
     * kernel takes this product; false, with nothing launched, when it does not (the caller then runs
     * {@link #matmul} and the activation kernel).
     */
    boolean gatedSkinny(CudaTensor x, CudaTensor w, CudaTensor out, SkinnyMatmul.Activation act) {
        long n = w.dim(0);
        long k = w.dim(1);
        long rows = x.numel() / k;
        if (n % 2 != 0 || !skinnyTakes(x, w, null, out, rows, k)) {
            return false;
        }
        device.stream().counters().gemm();
        skinny.gated(x, w, out, Math.toIntExact(rows), Math.toIntExact(n), Math.toIntExact(k), act);
        return true;
    }

    /**
     * The qkv projection with RoPE and the KV append in one skinny launch ({@link SkinnyMatmul#qkvRope}) when it
     * applies (the skinny kernel takes the product, no bias, bf16 q and pool, every dim of a head rotated, head dims
     * a multiple of 16); false, with nothing launched, otherwise.
     */
    boolean qkvRopeSkinny(CudaTensor x, CudaTensor w, CudaTensor bias, CudaTensor posIds, CudaTensor invFreq,
                          int rotaryDim, boolean interleave, CudaTensor q, CudaTensor pool, CudaTensor pageIdx,
                          CudaTensor offsets, int layer, int qHeads, int kvHeads, int headDim,
                          boolean releaseAttention) {
        long k = w.dim(1);
        long rows = x.numel() / k;
        if (rotaryDim != headDim || headDim % 16 != 0 || q.dtype() != DType.BF16 || pool.dtype() != DType.BF16
                || !skinnyTakes(x, w, bias, q, rows, k)) {
            return false;
        }
        device.stream().counters().gemm();
        skinny.qkvRope(x, w, Math.toIntExact(rows), Math.toIntExact(k), posIds, invFreq, q, pool, pageIdx, offsets,
                layer, qHeads, kvHeads, headDim, interleave, releaseAttention);
        return true;
    }

    /**
     * Whether this product goes to the skinny kernel: one it accepts, of at most the device's skinny rows, unless
     * the device wants batch-invariant numerics (the kernel's instantiation depends on the row count).
     */
    private boolean skinnyTakes(CudaTensor x, CudaTensor w, CudaTensor bias, CudaTensor out, long rows, long k) {
        return !device.batchInvariant()
                && SkinnyMatmul.accepts(x, w, bias, out, rows, k, device.options().skinnyMatmulRows());
    }

    private CudaTensor widened(String name, CudaTensor t) {
        if (t.dtype() == DType.F32) {
            return t;
        }
        CudaTensor f = device.scratch(name, DType.F32, t.numel());
        elementwise.convert(t, f);
        return f;
    }

    static int cudaType(DType d) {
        return switch (d) {
            case F32 -> CublasNative.R_32F;
            case BF16 -> CublasNative.R_16BF;
            case F16 -> CublasNative.R_16F;
            default -> throw new IllegalArgumentException("matmul operands must be F32, BF16 or F16, got " + d);
        };
    }
}
