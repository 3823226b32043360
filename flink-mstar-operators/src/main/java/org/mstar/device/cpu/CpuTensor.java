package org.mstar.device.cpu;

import java.util.Arrays;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Float8E4m3;
import org.mstar.device.HalfFloats;
import org.mstar.device.Tensor;

/**
 * A tensor in Java heap arrays: F32 in {@code float[]}, BF16/F16 in {@code short[]} (raw bits), I32 in
 * {@code int[]}, I64 in {@code long[]}, U8 and F8_E4M3 (codes) in {@code byte[]}. Views share the array and carry an
 * element offset. Ops on hot paths read the arrays directly; the element accessors are for the rest.
 */
public final class CpuTensor implements Tensor {
    private final CpuDevice device;
    private final DType dtype;
    private final long[] shape;
    private final Object storage;
    private final int offset;
    private final int numel;

    CpuTensor(CpuDevice device, DType dtype, long[] shape, Object storage, int offset) {
        this.device = device;
        this.dtype = dtype;
        this.shape = shape.clone();
        this.storage = storage;
        this.offset = offset;
        this.numel = Math.toIntExact(Arrays.stream(shape).reduce(1, Math::multiplyExact));
    }

    static Object newStorage(DType dtype, int n) {
        return switch (dtype) {
            case F32 -> new float[n];
            case BF16, F16 -> new short[n];
            case I32 -> new int[n];
            case I64 -> new long[n];
            case U8, F8_E4M3 -> new byte[n];
        };
    }

    /** The CPU tensor behind {@code t}, or a clear error for a tensor of another device. */
    public static CpuTensor of(Tensor t) {
        if (t instanceof CpuTensor c) {
            return c;
        }
        throw new IllegalArgumentException("expected a CPU tensor, got one on " + (t == null ? "null" : t.device().name()));
    }

    /** An F32 tensor of {@code shape} over {@code values} (not copied). */
    static CpuTensor wrap(CpuDevice device, float[] values, long[] shape) {
        return new CpuTensor(device, DType.F32, shape, values, 0);
    }

    @Override public DType dtype() { return dtype; }
    @Override public long[] shape() { return shape.clone(); }
    @Override public Device device() { return device; }
    @Override public long numel() { return numel; }

    /** Element offset of this view into its array. */
    public int offset() { return offset; }
    public int size() { return numel; }

    public float[] f32() { return (float[]) storage; }
    public short[] half() { return (short[]) storage; }
    public int[] i32() { return (int[]) storage; }
    public long[] i64() { return (long[]) storage; }
    public byte[] u8() { return (byte[]) storage; }

    /** Element {@code i} of this view, widened to fp32 (float types only). */
    public float getFloat(int i) {
        int j = offset + i;
        return switch (dtype) {
            case F32 -> ((float[]) storage)[j];
            case BF16 -> HalfFloats.bf16ToFloat(((short[]) storage)[j]);
            case F16 -> HalfFloats.f16ToFloat(((short[]) storage)[j]);
            case I32 -> ((int[]) storage)[j];
            case I64 -> ((long[]) storage)[j];
            case U8 -> ((byte[]) storage)[j] & 0xFF;
            case F8_E4M3 -> Float8E4m3.decode(((byte[]) storage)[j]);
        };
    }

    /** Store {@code v} at element {@code i}, rounding to this tensor's dtype. */
    public void setFloat(int i, float v) {
        int j = offset + i;
        switch (dtype) {
            case F32 -> ((float[]) storage)[j] = v;
            case BF16 -> ((short[]) storage)[j] = HalfFloats.floatToBf16(v);
            case F16 -> ((short[]) storage)[j] = HalfFloats.floatToF16(v);
            case F8_E4M3 -> ((byte[]) storage)[j] = Float8E4m3.encode(v);
            default -> throw new IllegalStateException("setFloat on a " + dtype + " tensor");
        }
    }

    public int getInt(int i) {
        return switch (dtype) {
            case I32 -> ((int[]) storage)[offset + i];
            case I64 -> Math.toIntExact(((long[]) storage)[offset + i]);
            default -> throw new IllegalStateException("getInt on a " + dtype + " tensor");
        };
    }

    public void setInt(int i, int v) {
        ((int[]) storage)[offset + i] = v;
    }

    public long getLong(int i) {
        return switch (dtype) {
            case I64 -> ((long[]) storage)[offset + i];
            case I32 -> ((int[]) storage)[offset + i];
            default -> throw new IllegalStateException("getLong on a " + dtype + " tensor");
        };
    }

    /** This integer view as an int array (a copy); I64 values must fit an int. */
    public int[] toIntArray() {
        int[] out = new int[numel];
        for (int i = 0; i < numel; i++) {
            out[i] = getInt(i);
        }
        return out;
    }

    /** This view widened to fp32 (a copy). */
    public float[] toFloatArray() {
        float[] out = new float[numel];
        if (dtype == DType.F32) {
            System.arraycopy(storage, offset, out, 0, numel);
        } else {
            for (int i = 0; i < numel; i++) {
                out[i] = getFloat(i);
            }
        }
        return out;
    }

    @Override
    public Tensor rows(long firstRow, long rows) {
        if (shape.length == 0 || firstRow < 0 || rows < 0 || firstRow + rows > shape[0]) {
            throw new IndexOutOfBoundsException("rows [" + firstRow + ", " + (firstRow + rows) + ") of shape "
                    + Arrays.toString(shape));
        }
        long rowElems = shape[0] == 0 ? 0 : numel / shape[0];
        long[] s = shape.clone();
        s[0] = rows;
        return new CpuTensor(device, dtype, s, storage, Math.toIntExact(offset + firstRow * rowElems));
    }

    @Override
    public Tensor reshape(long... newShape) {
        long n = Arrays.stream(newShape).reduce(1, Math::multiplyExact);
        if (n != numel) {
            throw new IllegalArgumentException("cannot reshape " + Arrays.toString(shape) + " to " + Arrays.toString(newShape));
        }
        return new CpuTensor(device, dtype, newShape, storage, offset);
    }

    Object storage() {
        return storage;
    }

    @Override
    public void close() {
        // heap memory: the garbage collector owns it
    }

    @Override
    public String toString() {
        return "CpuTensor" + Arrays.toString(shape) + " " + dtype;
    }
}
