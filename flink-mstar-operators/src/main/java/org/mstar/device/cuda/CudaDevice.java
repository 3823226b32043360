package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuMemGetInfo;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoDAsync;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoHAsync;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoD;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoDAsync;
import static jcuda.driver.JCudaDriver.cuMemcpyPeerAsync;
import static jcuda.driver.JCudaDriver.cuMemsetD8Async;
import static org.mstar.device.cuda.CudaCheck.check;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Objects;
import java.util.Optional;
import jcuda.Pointer;
import org.mstar.device.ByteRanges;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.DeviceMemory;
import org.mstar.device.Float8E4m3;
import org.mstar.device.HalfFloats;
import org.mstar.device.KernelOptions;
import org.mstar.device.PendingInts;
import org.mstar.device.Tensor;

/**
 * One GPU through the JCuda driver API: its primary context, one non-blocking stream on which every
 * transfer and op is enqueued in order, a reusing allocator, the kernels module and the ops, which choose their
 * kernel variants by the device's {@link KernelOptions}. The options are fixed when the device is built; a view
 * ({@link #withOptions}) runs other variants on the same GPU state. Host reads synchronise the stream. Not
 * thread-safe (one step loop drives a device and its views), but the driving thread may change: the context is
 * bound to whichever thread calls in.
 */
public final class CudaDevice implements Device {
    /** Host transfers are staged through pinned memory in chunks of at most this size. */
    private static final int STAGING_BYTES = 64 << 20;

    private final GpuResources gpu;
    private final SharedOpState shared;
    private final KernelOptions options;
    private final CudaOps ops;
    /** False for a view: the device that opened the GPU frees it. */
    private final boolean ownsGpu;

    /** The GPU with every kernel variant at its default ({@link KernelOptions#defaults()}). */
    public CudaDevice(int gpuIndex) {
        this(gpuIndex, KernelOptions.defaults());
    }

    /** @throws IllegalStateException saying so, before any CUDA call, when this build has no kernels */
    public CudaDevice(int gpuIndex, KernelOptions options) {
        Objects.requireNonNull(options, "options");
        KernelModule.requireBuilt();
        this.gpu = new GpuResources(gpuIndex);
        this.options = options;
        this.ownsGpu = true;
        this.shared = new SharedOpState(this);
        this.ops = new CudaOps(this, shared);
    }

    private CudaDevice(CudaDevice parent, KernelOptions options) {
        this.gpu = parent.gpu;
        this.shared = parent.shared;
        this.options = Objects.requireNonNull(options, "options");
        this.ownsGpu = false;
        this.ops = new CudaOps(this, shared);
    }

    @Override
    public String name() {
        return "cuda:" + context().index() + " (" + context().deviceName() + ")";
    }

    @Override
    public boolean isCuda() {
        return true;
    }

    public CudaContext context() {
        return gpu.context();
    }

    @Override
    public CudaStream stream() {
        return gpu.stream();
    }

    @Override
    public KernelOptions options() {
        return options;
    }

    /**
     * A view of this GPU computing with {@code options}: its own ops, reading {@code options}, over this device's
     * context, stream, memory, kernels, cuBLAS handles and RoPE tables. Closing a view does nothing; the device that
     * opened the GPU frees all of it, after which its views are not used.
     */
    @Override
    public CudaDevice withOptions(KernelOptions options) {
        return new CudaDevice(this, options);
    }

    /** Records {@code work}; the graph launches its kernels programmatically when this device's options say so. */
    @Override
    public CudaGraph capture(Runnable work) {
        enter();
        return CudaGraph.capture(stream(), work, options.programmaticLaunch() ? gpu.module().handle() : null);
    }

    /**
     * Device memory in use on this GPU (the driver's total minus free, all processes), for checking that engines
     * built and closed again give their memory back.
     */
    public long memoryInUse() {
        return memory().orElseThrow().usedBytes();
    }

    @Override
    public Optional<DeviceMemory> memory() {
        enter();
        long[] free = new long[1];
        long[] total = new long[1];
        check(cuMemGetInfo(free, total), "cuMemGetInfo");
        return Optional.of(new DeviceMemory(total[0], free[0]));
    }

    @Override
    public void releaseCachedMemory() {
        enter();
        synchronize();
        gpu.allocator().releaseCached();
    }

    @Override
    public CudaOps ops() {
        return ops;
    }

    /** Makes the context current on the calling thread, unconditionally (another device may have replaced it). */
    @Override
    public void bindToCurrentThread() {
        gpu.bindToCurrentThread();
    }

    @Override
    public boolean batchInvariant() {
        return options.batchInvariant();
    }

    /** Binds the context when a different thread than the last one calls in. */
    void enter() {
        gpu.enter();
    }

    @Override
    public CudaTensor allocate(DType dtype, long... shape) {
        enter();
        long bytes = Arrays.stream(shape).reduce(1, Math::multiplyExact) * dtype.bytes();
        DeviceAllocator.Block b = gpu.allocator().allocate(bytes, dtype + Arrays.toString(shape));
        return new CudaTensor(this, dtype, shape, b.pointer(), b);
    }

    @Override
    public CudaTensor zeros(DType dtype, long... shape) {
        CudaTensor t = allocate(dtype, shape);
        check(cuMemsetD8Async(t.pointer(), (byte) 0, t.byteSize(), stream().handle()), "cuMemsetD8Async for zeros");
        return t;
    }

    @Override
    public CudaTensor fromFloats(float[] data, DType dtype, long... shape) {
        if (!dtype.isFloat() && dtype != DType.F8_E4M3) {
            throw new IllegalArgumentException("fromFloats needs a float or FP8 dtype, got " + dtype);
        }
        CudaTensor t = allocate(dtype, shape);
        checkCount(data.length, t);
        ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(t.byteSize())).order(ByteOrder.LITTLE_ENDIAN);
        for (float f : data) {
            switch (dtype) {
                case F32 -> b.putFloat(f);
                case BF16 -> b.putShort(HalfFloats.floatToBf16(f));
                case F8_E4M3 -> b.put(Float8E4m3.encode(f));
                default -> b.putShort(HalfFloats.floatToF16(f));
            }
        }
        copyFromHost(b.flip(), t);
        return t;
    }

    @Override
    public CudaTensor fromInts(int[] data, long... shape) {
        CudaTensor t = allocate(DType.I32, shape);
        checkCount(data.length, t);
        ByteBuffer b = ByteBuffer.allocate(data.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        b.asIntBuffer().put(data);
        copyFromHost(b, t);
        return t;
    }

    /** Upload longs as an I64 tensor (seeds and RNG offsets). */
    public CudaTensor fromLongs(long[] data, long... shape) {
        CudaTensor t = allocate(DType.I64, shape);
        checkCount(data.length, t);
        ByteBuffer b = ByteBuffer.allocate(data.length * 8).order(ByteOrder.LITTLE_ENDIAN);
        b.asLongBuffer().put(data);
        copyFromHost(b, t);
        return t;
    }

    private static void checkCount(int given, Tensor t) {
        if (given != t.numel()) {
            throw new IllegalArgumentException(given + " values for shape " + Arrays.toString(t.shape()));
        }
    }

    @Override
    public float[] toFloats(Tensor t) {
        CudaTensor c = CudaTensor.of(t, "toFloats");
        if (!c.dtype().isFloat() && c.dtype() != DType.F8_E4M3) {
            throw new IllegalArgumentException("toFloats needs a float or FP8 tensor, got " + c.dtype());
        }
        ByteBuffer b = download(c);
        float[] out = new float[Math.toIntExact(c.numel())];
        for (int i = 0; i < out.length; i++) {
            out[i] = switch (c.dtype()) {
                case F32 -> b.getFloat();
                case BF16 -> HalfFloats.bf16ToFloat(b.getShort());
                case F8_E4M3 -> Float8E4m3.decode(b.get());
                default -> HalfFloats.f16ToFloat(b.getShort());
            };
        }
        return out;
    }

    @Override
    public int[] toInts(Tensor t) {
        CudaTensor c = CudaTensor.of(t, "toInts");
        if (c.dtype() != DType.I32) {
            throw new IllegalArgumentException("toInts needs an I32 tensor, got " + c.dtype());
        }
        int[] out = new int[Math.toIntExact(c.numel())];
        download(c).asIntBuffer().get(out);
        return out;
    }

    @Override
    public PendingInts readIntsLater(Tensor t) {
        enter();
        CudaTensor c = CudaTensor.of(t, "readIntsLater");
        if (c.dtype() != DType.I32) {
            throw new IllegalArgumentException("readIntsLater needs an I32 tensor, got " + c.dtype());
        }
        return c.byteSize() > Readbacks.SLOT_BYTES ? Device.super.readIntsLater(c) : gpu.readbacks().read(c, stream());
    }

    private ByteBuffer download(CudaTensor c) {
        ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(c.byteSize())).order(ByteOrder.LITTLE_ENDIAN);
        copyToHost(c, b);
        return b;
    }

    /**
     * Reads {@code dst.byteSize()} bytes from {@code src}'s position (the position is left as it was). Up to
     * a megabyte enqueues through the {@link UploadRing} without waiting; larger copies (weights) go through
     * the staging buffer, synchronising per chunk.
     */
    @Override
    public void copyFromHost(ByteBuffer src, Tensor dst) {
        enter();
        CudaTensor d = CudaTensor.of(dst, "copyFromHost destination");
        long total = d.byteSize();
        if (src.remaining() < total) {
            throw new IllegalArgumentException("copyFromHost: " + src.remaining() + " bytes for " + d + " of " + total);
        }
        CudaStream stream = stream();
        stream.counters().upload(total);
        if (total <= UploadRing.CHUNK_BYTES) {
            gpu.uploads().upload(src, (int) total, d.pointer(), stream);
            return;
        }
        ByteBuffer in = src.duplicate();
        int limit = in.limit();
        for (long done = 0; done < total; ) {
            int n = (int) Math.min(STAGING_BYTES, total - done);
            PinnedBuffer staging = gpu.staging(n);
            ByteBuffer s = staging.buffer();
            in.limit(in.position() + n);
            s.put(in);
            in.limit(limit);
            check(cuMemcpyHtoDAsync(d.pointer().withByteOffset(done), staging.pointer(), n, stream.handle()),
                    "cuMemcpyHtoDAsync(" + n + " bytes) into " + d);
            stream.synchronize(); // the staging buffer is refilled next round
            done += n;
        }
    }

    /** Writes {@code src.byteSize()} bytes at {@code dst}'s position (the position is left as it was). */
    @Override
    public void copyToHost(Tensor src, ByteBuffer dst) {
        enter();
        CudaTensor s = CudaTensor.of(src, "copyToHost source");
        long total = s.byteSize();
        if (dst.remaining() < total) {
            throw new IllegalArgumentException("copyToHost: room for " + dst.remaining() + " bytes, " + s + " has " + total);
        }
        ByteBuffer out = dst.duplicate();
        CudaStream stream = stream();
        for (long done = 0; done < total; ) {
            int n = (int) Math.min(STAGING_BYTES, total - done);
            PinnedBuffer staging = gpu.staging(n);
            ByteBuffer st = staging.buffer();
            check(cuMemcpyDtoHAsync(staging.pointer(), s.pointer().withByteOffset(done), n, stream.handle()),
                    "cuMemcpyDtoHAsync(" + n + " bytes) from " + s);
            stream.synchronize();
            st.limit(n);
            out.put(st);
            done += n;
        }
    }

    @Override
    public void copy(Tensor src, Tensor dst) {
        enter();
        CudaTensor s = CudaTensor.of(src, "copy source");
        CudaTensor d = CudaTensor.of(dst, "copy destination");
        if (s.byteSize() != d.byteSize()) {
            throw new IllegalArgumentException("copy between " + s + " and " + d + " of different byte sizes");
        }
        check(cuMemcpyDtoDAsync(d.pointer(), s.pointer(), s.byteSize(), stream().handle()), "cuMemcpyDtoDAsync");
    }

    @Override
    public boolean sameDevice(Device other) {
        return other instanceof CudaDevice c && c.gpu == gpu;
    }

    /**
     * Peer copies on this GPU's stream, one a range, read from {@code from}'s memory (staged by the driver where the
     * two GPUs have no peer access); waits for them.
     */
    @Override
    public void copyFrom(Device from, Tensor src, Tensor dst, ByteRanges ranges) {
        if (!(from instanceof CudaDevice f)) {
            throw new IllegalArgumentException("a GPU copies from another GPU, not " + from.name());
        }
        CudaTensor s = CudaTensor.of(src, "copyFrom source");
        CudaTensor d = CudaTensor.of(dst, "copyFrom destination");
        ranges.requireWithin(s, d, 1);
        enter();
        for (int i = 0; i < ranges.size(); i++) {
            check(cuMemcpyPeerAsync(d.pointer().withByteOffset(ranges.targets()[i]), context().handle(),
                    s.pointer().withByteOffset(ranges.sources()[i]), f.context().handle(), ranges.lengths()[i],
                    stream().handle()), "cuMemcpyPeerAsync from " + f.name());
        }
        stream().synchronize();
    }

    /**
     * A constant fp32 table (e.g. RoPE inverse frequencies) copied synchronously outside the stream, so the
     * first use may happen while a CUDA graph is being captured.
     */
    CudaTensor uploadConstant(float[] values) {
        enter();
        DeviceAllocator.Block b = gpu.allocator().allocate(values.length * 4L, "constant table");
        check(cuMemcpyHtoD(b.pointer(), Pointer.to(values), values.length * 4L), "cuMemcpyHtoD constant table");
        return new CudaTensor(this, DType.F32, new long[] {values.length}, b.pointer(), b);
    }

    /** A view of the named workspace buffer as a tensor of {@code shape}; valid until the next call for that name. */
    CudaTensor scratch(String name, DType dtype, long... shape) {
        long bytes = Arrays.stream(shape).reduce(1, Math::multiplyExact) * dtype.bytes();
        return new CudaTensor(this, dtype, shape, gpu.workspace().get(name, bytes).pointer(), null);
    }

    /**
     * Like {@link #scratch}, but zero when the workspace first hands the buffer out; the kernels that use it
     * must leave it zero again (counters that the last user resets).
     */
    CudaTensor zeroedScratch(String name, DType dtype, long... shape) {
        long bytes = Arrays.stream(shape).reduce(1, Math::multiplyExact) * dtype.bytes();
        DeviceAllocator.Block b = gpu.workspace().get(name, bytes);
        if (gpu.firstZeroing(b)) {
            check(cuMemsetD8Async(b.pointer(), (byte) 0, b.bytes(), stream().handle()), "cuMemsetD8Async for " + name);
        }
        return new CudaTensor(this, dtype, shape, b.pointer(), null);
    }

    Kernel kernel(String name) {
        return gpu.module().kernel(name);
    }

    void release(DeviceAllocator.Block block) {
        gpu.allocator().release(block);
    }

    /** Frees the GPU when this device opened it; on a view, nothing (its tensors stay valid until the GPU closes). */
    @Override
    public void close() {
        if (!ownsGpu) {
            return;
        }
        enter();
        stream().synchronize();
        shared.close();
        gpu.close();
    }
}
