package org.mstar.device.cpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Objects;
import org.mstar.device.ByteRanges;
import org.mstar.device.ComputeOps;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.DeviceStream;
import org.mstar.device.HalfFloats;
import org.mstar.device.KernelOptions;
import org.mstar.device.Tensor;

/**
 * The pure-Java reference device: tensors in heap arrays, every op run eagerly on the calling thread
 * (multi-threaded inside an op where it matters). It is the oracle the CUDA device is checked against
 * and the path CI runs.
 */
public final class CpuDevice implements Device {
    private static final DeviceStream EAGER = () -> { };

    private final CpuOps ops;
    private final KernelOptions options;
    /** False for a view ({@link #withOptions}): the device that made the ops' threads shuts them down. */
    private final boolean ownsOps;

    public CpuDevice() {
        this(KernelOptions.defaults());
    }

    /** One worker thread per processor; {@code options} are reported, the CPU computes the same either way. */
    public CpuDevice(KernelOptions options) {
        this(Runtime.getRuntime().availableProcessors(), options);
    }

    /** @param threads worker threads for ops that parallelise (1 = single-threaded) */
    public CpuDevice(int threads) {
        this(threads, KernelOptions.defaults());
    }

    private CpuDevice(int threads, KernelOptions options) {
        this(new CpuOps(threads), options, true);
    }

    private CpuDevice(CpuOps ops, KernelOptions options, boolean ownsOps) {
        this.ops = ops;
        this.options = Objects.requireNonNull(options, "options");
        this.ownsOps = ownsOps;
    }

    @Override
    public String name() {
        return "cpu";
    }

    @Override
    public boolean isCuda() {
        return false;
    }

    @Override
    public KernelOptions options() {
        return options;
    }

    /** A view sharing this device's ops (and so their threads); tensors are heap arrays, usable through any device. */
    @Override
    public CpuDevice withOptions(KernelOptions options) {
        return new CpuDevice(ops, options, false);
    }

    @Override
    public CpuTensor allocate(DType dtype, long... shape) {
        return zeros(dtype, shape);
    }

    @Override
    public CpuTensor zeros(DType dtype, long... shape) {
        long n = Arrays.stream(shape).reduce(1, Math::multiplyExact);
        return new CpuTensor(this, dtype, shape, CpuTensor.newStorage(dtype, Math.toIntExact(n)), 0);
    }

    @Override
    public CpuTensor fromFloats(float[] data, DType dtype, long... shape) {
        CpuTensor t = zeros(dtype, shape);
        checkCount(data.length, t);
        if (dtype == DType.F32) {
            System.arraycopy(data, 0, t.f32(), 0, data.length);
        } else {
            for (int i = 0; i < data.length; i++) {
                t.setFloat(i, data[i]);
            }
        }
        return t;
    }

    @Override
    public CpuTensor fromInts(int[] data, long... shape) {
        CpuTensor t = zeros(DType.I32, shape);
        checkCount(data.length, t);
        System.arraycopy(data, 0, t.i32(), 0, data.length);
        return t;
    }

    /** Upload longs as an I64 tensor. */
    public CpuTensor fromLongs(long[] data, long... shape) {
        CpuTensor t = zeros(DType.I64, shape);
        checkCount(data.length, t);
        System.arraycopy(data, 0, t.i64(), 0, data.length);
        return t;
    }

    private static void checkCount(int given, CpuTensor t) {
        if (given != t.size()) {
            throw new IllegalArgumentException(given + " values for shape " + Arrays.toString(t.shape()));
        }
    }

    @Override
    public float[] toFloats(Tensor t) {
        return CpuTensor.of(t).toFloatArray();
    }

    @Override
    public int[] toInts(Tensor t) {
        return CpuTensor.of(t).toIntArray();
    }

    @Override
    public void copyFromHost(ByteBuffer src, Tensor dst) {
        CpuTensor d = CpuTensor.of(dst);
        ByteBuffer b = src.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        int n = d.size();
        int off = d.offset();
        switch (d.dtype()) {
            case F32 -> b.asFloatBuffer().get(d.f32(), off, n);
            case BF16, F16 -> b.asShortBuffer().get(d.half(), off, n);
            case I32 -> b.asIntBuffer().get(d.i32(), off, n);
            case I64 -> b.asLongBuffer().get(d.i64(), off, n);
            case U8, F8_E4M3 -> b.get(d.u8(), off, n);
        }
    }

    @Override
    public void copyToHost(Tensor src, ByteBuffer dst) {
        CpuTensor s = CpuTensor.of(src);
        ByteBuffer b = dst.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        int n = s.size();
        int off = s.offset();
        switch (s.dtype()) {
            case F32 -> b.asFloatBuffer().put(s.f32(), off, n);
            case BF16, F16 -> b.asShortBuffer().put(s.half(), off, n);
            case I32 -> b.asIntBuffer().put(s.i32(), off, n);
            case I64 -> b.asLongBuffer().put(s.i64(), off, n);
            case U8, F8_E4M3 -> b.put(s.u8(), off, n);
        }
    }

    @Override
    public void copy(Tensor src, Tensor dst) {
        CpuTensor s = CpuTensor.of(src);
        CpuTensor d = CpuTensor.of(dst);
        if (s.byteSize() != d.byteSize() || s.dtype().bytes() != d.dtype().bytes()) {
            throw new IllegalArgumentException("copy between " + s + " and " + d);
        }
        System.arraycopy(s.storage(), s.offset(), d.storage(), d.offset(), s.size());
    }

    @Override
    public boolean sameDevice(Device other) {
        return other instanceof CpuDevice c && c.ops == ops;
    }

    /** One array copy a range: another CPU device's tensors are heap arrays too. */
    @Override
    public void copyFrom(Device from, Tensor src, Tensor dst, ByteRanges ranges) {
        if (!(from instanceof CpuDevice)) {
            throw new IllegalArgumentException("a CPU device copies from another CPU device, not " + from.name());
        }
        CpuTensor s = CpuTensor.of(src);
        CpuTensor d = CpuTensor.of(dst);
        int element = s.dtype().bytes();
        if (d.dtype().bytes() != element) {
            throw new IllegalArgumentException("copy between " + s + " and " + d);
        }
        ranges.requireWithin(s, d, element);
        for (int i = 0; i < ranges.size(); i++) {
            System.arraycopy(s.storage(), s.offset() + (int) (ranges.sources()[i] / element), d.storage(),
                    d.offset() + (int) (ranges.targets()[i] / element), (int) (ranges.lengths()[i] / element));
        }
    }

    @Override
    public ComputeOps ops() {
        return ops;
    }

    @Override
    public DeviceStream stream() {
        return EAGER;
    }

    @Override
    public void close() {
        if (ownsOps) {
            ops.close();
        }
    }

    /** fp32 → bf16 → fp32 for every element: what bf16 storage keeps (test helper). */
    public static float[] roundedToBf16(float[] data) {
        float[] out = new float[data.length];
        for (int i = 0; i < data.length; i++) {
            out[i] = HalfFloats.roundBf16(data[i]);
        }
        return out;
    }
}
