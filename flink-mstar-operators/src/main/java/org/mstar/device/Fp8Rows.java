package org.mstar.device;

import java.util.Arrays;

/**
 * Activations quantised per row (per token) to FP8 for a W8A8 product ({@link ProjectionOps#matmul} with an
 * {@link Fp8Weight} that {@link Fp8Weight#quantisesActivations() quantises activations}): E4M3 codes
 * ({@link Float8E4m3}) {@code [rows, K]} and one fp32 scale a row, element (i, j) being
 * {@code decode(codes[i, j]) · scales[i]}. The scale is dynamic, chosen per row as vLLM's per-token FP8 does: the
 * row's largest magnitude over 448 (1 for a row of zeros), rounded once to fp32; each code is the element divided
 * by it (fp32 division) rounded to the nearest code, ties to even, saturated at ±448 ({@link #quantise}). Both
 * devices define it so; a GPU's reductions may order a fused producer's sums differently, which can move a code by
 * one step where the value lies on a rounding boundary.
 *
 * <p>{@link NormOps#rmsNorm} and {@link ElementwiseOps#siluMul} write one directly (their fp32 results quantised,
 * not rounded to an activation dtype first), {@link ProjectionOps#quantizeRows} quantises a tensor. As an
 * {@link Fp8Tensor} it has the activations' shape {@code [rows, K]}.
 */
public final class Fp8Rows implements Fp8Tensor {
    private final Tensor codes;
    private final Tensor scales;

    /**
     * @param codes U8 {@code [rows, K]}
     * @param scales F32 with {@code rows} elements
     */
    public Fp8Rows(Tensor codes, Tensor scales) {
        if (codes.dtype() != DType.U8 || codes.rank() != 2 || scales.dtype() != DType.F32
                || scales.numel() != codes.dim(0)) {
            throw new IllegalArgumentException("FP8 rows are U8 codes [rows, K] and one F32 scale a row, got " + codes
                    + " and " + scales);
        }
        this.codes = codes;
        this.scales = scales.reshape(codes.dim(0));
    }

    /** New rows {@code [rows, k]} on {@code device}, contents unspecified. */
    public static Fp8Rows allocate(Device device, long rows, long k) {
        Tensor codes = device.allocate(DType.U8, rows, k);
        try {
            return new Fp8Rows(codes, device.allocate(DType.F32, rows));
        } catch (RuntimeException e) {
            codes.close();
            throw e;
        }
    }

    /**
     * Quantises {@code len} values of {@code v} from {@code from} into {@code codes} from {@code codesFrom}; returns
     * the row's scale.
     */
    public static float quantise(float[] v, int from, int len, byte[] codes, int codesFrom) {
        float amax = 0f;
        for (int i = 0; i < len; i++) {
            amax = Math.max(amax, Math.abs(v[from + i]));
        }
        float scale = amax > 0 ? amax / Float8E4m3.MAX : 1f;
        for (int i = 0; i < len; i++) {
            codes[codesFrom + i] = Float8E4m3.encode(v[from + i] / scale);
        }
        return scale;
    }

    /** U8 {@code [rows, K]}: the E4M3 codes. */
    @Override
    public Tensor codes() {
        return codes;
    }

    /** F32 {@code [rows]}: each row's scale. */
    @Override
    public Tensor scales() {
        return scales;
    }

    @Override
    public Fp8Rows rows(long firstRow, long rows) {
        return new Fp8Rows(codes.rows(firstRow, rows), scales.rows(firstRow, rows));
    }

    /** The same codes and scales as {@code [rows, K]}: only a reshape that keeps the rows' width is allowed. */
    @Override
    public Tensor reshape(long... shape) {
        long k = codes.dim(1);
        if (shape.length == 0 || shape[shape.length - 1] != k || Arrays.stream(shape).reduce(1, Math::multiplyExact)
                != codes.numel()) {
            throw new UnsupportedOperationException("FP8 rows " + this + " keep rows of " + k + ", asked for "
                    + Arrays.toString(shape));
        }
        return this;
    }

    @Override
    public String toString() {
        return "Fp8Rows" + Arrays.toString(shape());
    }
}
