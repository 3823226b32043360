package org.mstar.device.cpu;

import org.mstar.device.DType;
import org.mstar.device.Float8E4m3;
import org.mstar.device.HalfFloats;

/**
 * Bulk moves between float tensors and fp32 arrays, with one dtype switch per run of elements rather
 * than per element (the per-element accessors of {@link CpuTensor} dispatch on every call). Offsets are
 * element offsets relative to the view, like {@link CpuTensor#getFloat}. An F8_E4M3 tensor (a KV pool) reads as its codes'
 * values and takes writes rounded to the nearest code, saturating at ±448: the same rounding as the CUDA kernels.
 */
final class FloatRows {
    private FloatRows() {}

    /** Widen elements {@code [from, from + n)} of {@code t} into {@code dst[dstOff ..]}. */
    static void read(CpuTensor t, int from, float[] dst, int dstOff, int n) {
        int src = t.offset() + from;
        switch (t.dtype()) {
            case F32 -> System.arraycopy(t.f32(), src, dst, dstOff, n);
            case BF16 -> {
                short[] h = t.half();
                for (int i = 0; i < n; i++) {
                    dst[dstOff + i] = HalfFloats.bf16ToFloat(h[src + i]);
                }
            }
            case F16 -> {
                short[] h = t.half();
                for (int i = 0; i < n; i++) {
                    dst[dstOff + i] = HalfFloats.f16ToFloat(h[src + i]);
                }
            }
            case F8_E4M3 -> {
                byte[] b = t.u8();
                for (int i = 0; i < n; i++) {
                    dst[dstOff + i] = Float8E4m3.decode(b[src + i]);
                }
            }
            default -> throw new IllegalArgumentException("expected a float tensor, got " + t);
        }
    }

    /** A new fp32 copy of the whole view. */
    static float[] readAll(CpuTensor t) {
        float[] out = new float[t.size()];
        read(t, 0, out, 0, out.length);
        return out;
    }

    /** Store {@code src[srcOff .. srcOff + n)} into elements {@code [from, from + n)} of {@code t}, rounding to its dtype. */
    static void write(float[] src, int srcOff, CpuTensor t, int from, int n) {
        int dst = t.offset() + from;
        switch (t.dtype()) {
            case F32 -> System.arraycopy(src, srcOff, t.f32(), dst, n);
            case BF16 -> {
                short[] h = t.half();
                for (int i = 0; i < n; i++) {
                    h[dst + i] = HalfFloats.floatToBf16(src[srcOff + i]);
                }
            }
            case F16 -> {
                short[] h = t.half();
                for (int i = 0; i < n; i++) {
                    h[dst + i] = HalfFloats.floatToF16(src[srcOff + i]);
                }
            }
            case F8_E4M3 -> {
                byte[] b = t.u8();
                for (int i = 0; i < n; i++) {
                    b[dst + i] = Float8E4m3.encode(src[srcOff + i]);
                }
            }
            default -> throw new IllegalArgumentException("expected a float tensor, got " + t);
        }
    }

    /**
     * Copy {@code n} elements between float tensors. Equal dtypes copy the raw bits (exact, NaN payloads
     * included); otherwise the value is widened and rounded once to the destination dtype.
     */
    static void copy(CpuTensor src, int srcFrom, CpuTensor dst, int dstFrom, int n) {
        if (src.dtype() == dst.dtype()) {
            if (!src.dtype().isFloat() && src.dtype() != DType.F8_E4M3) {
                throw new IllegalArgumentException("expected a float tensor, got " + src);
            }
            System.arraycopy(src.storage(), src.offset() + srcFrom, dst.storage(), dst.offset() + dstFrom, n);
            return;
        }
        float[] buf = new float[n];
        read(src, srcFrom, buf, 0, n);
        write(buf, 0, dst, dstFrom, n);
    }
}
