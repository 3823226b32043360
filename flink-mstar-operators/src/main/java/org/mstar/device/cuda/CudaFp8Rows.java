package org.mstar.device.cuda;

import static org.mstar.device.cuda.Elementwise.code;

import org.mstar.device.DType;
import org.mstar.device.Fp8Rows;

/**
 * Activations quantised per row to FP8 ({@link Fp8Rows}), launching fp8_activations.cu: a tensor's rows
 * (fp8_quantize_rows), an RMSNorm's (rms_norm_fp8) and a SiLU·mul's (silu_mul_fp8) results quantised as they are
 * stored, and FP8 rows back to bf16 for a product that multiplies bf16. The row kernels take one block a row, each
 * thread holding up to {@value #PER_THREAD} of its elements.
 */
final class CudaFp8Rows {
    /** kFp8RowPerThread in fp8_activations.cu. */
    private static final int PER_THREAD = 32;
    /** The widest row a block of 1024 threads holds. */
    private static final long MAX_WIDTH = 1024L * PER_THREAD;

    private final CudaDevice device;
    private final Elementwise elementwise;

    CudaFp8Rows(CudaDevice device, Elementwise elementwise) {
        this.device = device;
        this.elementwise = elementwise;
    }

    /**
     * {@code out} = x's rows quantised; with {@code roundTrip} non-null (BF16, x's size) also the dequantised rows
     * rounded to bf16.
     */
    void quantize(CudaTensor x, CudaTensor codes, CudaTensor scales, CudaTensor roundTrip, String op) {
        long k = codes.dim(1);
        int rows = rows(codes, x.numel(), op);
        launch("fp8_quantize_rows", rows, k, new KernelArgs().tensor(x).i32(code(x)).tensor(codes).tensor(scales)
                .tensor(roundTrip).i32(Math.toIntExact(k)), op);
    }

    void quantize(CudaTensor x, Fp8Rows out, String op) {
        quantize(x, CudaTensor.of(out.codes(), op + " codes"), CudaTensor.of(out.scales(), op + " scales"), null, op);
    }

    /** rms_norm's result (with its fused residual add) quantised into {@code out}. */
    void rmsNorm(CudaTensor x, CudaTensor residual, CudaTensor weight, float eps, Fp8Rows out) {
        CudaTensor codes = CudaTensor.of(out.codes(), "rmsNorm out codes");
        long hidden = codes.dim(1);
        int rows = rows(codes, x.numel(), "rmsNorm");
        if (weight.numel() != hidden || (residual != null && residual.numel() != x.numel())) {
            throw new IllegalArgumentException("rmsNorm: x " + x + ", residual " + residual + ", weight " + weight
                    + " and FP8 out " + out + " disagree");
        }
        launch("rms_norm_fp8", rows, hidden, new KernelArgs().tensor(x).i32(code(x)).tensor(residual)
                .i32(residual == null ? 0 : code(residual)).tensor(weight).i32(code(weight)).tensor(codes)
                .tensor(CudaTensor.of(out.scales(), "rmsNorm out scales")).i32(Math.toIntExact(hidden)).f32(eps),
                "rmsNorm");
    }

    /** silu(gate) · up quantised into {@code out}, gateUp {@code [rows, 2·inter]}. */
    void siluMul(CudaTensor gateUp, Fp8Rows out) {
        CudaTensor codes = CudaTensor.of(out.codes(), "siluMul out codes");
        long inter = codes.dim(1);
        int rows = rows(codes, gateUp.numel() / 2, "siluMul");
        launch("silu_mul_fp8", rows, inter, new KernelArgs().tensor(gateUp).i32(code(gateUp)).tensor(codes)
                .tensor(CudaTensor.of(out.scales(), "siluMul out scales")).i32(Math.toIntExact(inter)), "siluMul");
    }

    /** FP8 rows dequantised into {@code out} (BF16, the same size), each element rounded once. */
    void dequantize(Fp8Rows x, CudaTensor out) {
        CudaTensor codes = CudaTensor.of(x.codes(), "matmul x codes");
        if (out.dtype() != DType.BF16 || out.numel() != codes.numel()) {
            throw new IllegalArgumentException("FP8 rows " + x + " dequantise into BF16 of their size, got " + out);
        }
        elementwise.launch("fp8_rows_dequantize_bf16", codes.numel(), new KernelArgs().tensor(codes)
                .tensor(CudaTensor.of(x.scales(), "matmul x scales")).tensor(out).i64(codes.dim(0))
                .i32(Math.toIntExact(codes.dim(1))), "matmul");
    }

    /** A per-tensor scale repeated into {@code out} (F32), one a weight row. */
    void broadcastScale(CudaTensor scale, CudaTensor out) {
        elementwise.launch("fp8_broadcast_scale", out.numel(), new KernelArgs().tensor(scale).tensor(out)
                .i32(Math.toIntExact(out.numel())), "matmul");
    }

    private static int rows(CudaTensor codes, long elements, String op) {
        long k = codes.dim(1);
        if (elements != codes.numel()) {
            throw new IllegalArgumentException(op + ": " + elements + " values do not fill FP8 rows " + codes);
        }
        if (k > MAX_WIDTH) {
            throw new IllegalArgumentException(op + ": rows of " + k + " elements; an FP8 row kernel holds at most "
                    + MAX_WIDTH);
        }
        return Math.toIntExact(codes.dim(0));
    }

    private void launch(String kernel, int rows, long width, KernelArgs args, String op) {
        if (rows == 0) {
            return;
        }
        long warps = ((width + PER_THREAD - 1) / PER_THREAD + 31) / 32;
        int threads = (int) Math.max(128, Math.min(1024, warps * 32));
        device.enter();
        device.kernel(kernel).launch(device.stream(), rows, 1, 1, threads, 0, args, op);
    }
}
