package org.mstar.model.io;

import java.nio.ByteBuffer;
import org.mstar.device.DType;
import org.mstar.device.HalfFloats;

/**
 * Float elements of host buffers in a device's storage formats (BF16, F16, F32), by element index and
 * independent of the buffer's position. Buffers must be little-endian, as safetensors and the devices are.
 */
public final class HostFloats {
    private HostFloats() {}

    /** Element {@code index} of {@code b}, widened to fp32. */
    public static float get(ByteBuffer b, DType dtype, int index) {
        return switch (dtype) {
            case BF16 -> HalfFloats.bf16ToFloat(b.getShort(index * 2));
            case F16 -> HalfFloats.f16ToFloat(b.getShort(index * 2));
            case F32 -> b.getFloat(index * 4);
            default -> throw new IllegalArgumentException("not a float dtype: " + dtype);
        };
    }

    /** Stores {@code v} at element {@code index}, rounding to nearest even for BF16 and F16. */
    public static void put(ByteBuffer b, DType dtype, int index, float v) {
        switch (dtype) {
            case BF16 -> b.putShort(index * 2, HalfFloats.floatToBf16(v));
            case F16 -> b.putShort(index * 2, HalfFloats.floatToF16(v));
            case F32 -> b.putFloat(index * 4, v);
            default -> throw new IllegalArgumentException("not a float dtype: " + dtype);
        }
    }

    /** Converts the first {@code count} elements of {@code src} into {@code dst} (through fp32, one rounding). */
    static void convert(ByteBuffer src, DType from, ByteBuffer dst, DType to, int count) {
        for (int i = 0; i < count; i++) {
            put(dst, to, i, get(src, from, i));
        }
    }
}
