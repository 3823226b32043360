package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuMemGetInfo;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoDAsync;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoHAsync;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoD;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoDAsync;
import static jcuda.driver.JCudaDriver.cuMemsetD8Async;
import static org.mstar.device.cuda.CudaCheck.check;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Optional;
import java.util.Set;
import jcuda.Pointer;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.DeviceMemory;
import org.mstar.device.HalfFloats;
import org.mstar.device.PendingInts;
import org.mstar.device.Tensor;

/**
 * One GPU through the JCuda driver API: its primary context, one non-blocking stream on which every
 * transfer and op is enqueued in order, a reusing allocator, the kernels module and the ops. Host reads
 * synchronise the stream. Not thread-safe (one step loop drives a device), but the driving thread may
 * change: the context is bound to whichever thread calls in.
 */
public final class CudaDevice implements Device {
    /** Host transfers are staged through pinned memory in chunks of at most this size. */
    private static final int STAGING_BYTES = 64 << 20;
    /** Rows up to which bf16 matmuls take the skinny kernel by default (measured, docs/results/perf.md). */
    public static final int DEFAULT_SKINNY_MATMUL_ROWS = 16;
    /** Most rows the skinny-matmul kernel serves. */
    public static final int MAX_SKINNY_MATMUL_ROWS = SkinnyMatmul.MAX_ROWS;

    private final CudaContext context;
    private final CudaStream stream;
    private final DeviceAllocator allocator;
    private final Workspace workspace;
    private final KernelModule module;
    private final CudaOps ops;
    private final UploadRing uploads;
    private final Readbacks readbacks = new Readbacks();
    /** Workspace blocks {@link #zeroedScratch} has zeroed (they are never freed before the device closes). */
    private final Set<DeviceAllocator.Block> zeroedBlocks = Collections.newSetFromMap(new IdentityHashMap<>());
    private PinnedBuffer staging;
    private Thread boundThread;
    private boolean tensorCorePrefill = true;
    private int skinnyMatmulRows = DEFAULT_SKINNY_MATMUL_ROWS;
    private boolean batchInvariant;
    private boolean programmaticLaunch = true;
    private boolean qkvRopeInMatmul = true;

    /** @throws IllegalStateException saying so, before any CUDA call, when this build has no kernels */
    public CudaDevice(int gpuIndex) {
        KernelModule.requireBuilt();
        this.context = new CudaContext(gpuIndex);
        this.boundThread = Thread.currentThread();
        this.stream = new CudaStream();
        this.allocator = new DeviceAllocator(stream.counters());
        this.workspace = new Workspace(allocator);
        this.uploads = new UploadRing();
        this.module = new KernelModule();
        this.ops = new CudaOps(this);
    }

    @Override
    public String name() {
        return "cuda:" + context.index() + " (" + context.deviceName() + ")";
    }

    @Override
    public boolean isCuda() {
        return true;
    }

    public CudaContext context() {
        return context;
    }

    @Override
    public CudaStream stream() {
        return stream;
    }

    @Override
    public CudaGraph capture(Runnable work) {
        enter();
        return CudaGraph.capture(stream, work, programmaticLaunch ? module.handle() : null);
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
        allocator.releaseCached();
    }

    @Override
    public CudaOps ops() {
        return ops;
    }

    /** Makes the context current on the calling thread, unconditionally (another device may have replaced it). */
    @Override
    public void bindToCurrentThread() {
        context.makeCurrent();
        boundThread = Thread.currentThread();
    }

    /**
     * Whether bf16 prefill attention runs on the tensor cores (the default) or on the CUDA-core kernel that
     * fp32 uses; the GPU harness switches it off to measure the one against the other on the same model.
     */
    public void setTensorCorePrefill(boolean on) {
        this.tensorCorePrefill = on;
    }

    boolean tensorCorePrefill() {
        return tensorCorePrefill;
    }

    /**
     * Whether graphs captured from now on launch the project's kernels programmatically (the default; see
     * {@link CudaGraph}); the GPU harness switches it off to measure the one against the other. Graphs already
     * captured keep the setting they were captured with.
     */
    public void setProgrammaticLaunch(boolean on) {
        this.programmaticLaunch = on;
    }

    /**
     * Whether the qkv projection of a few rows rotates q and k and appends k and v to the pool in the skinny matmul's
     * epilogue ({@link SkinnyMatmul#qkvRope}; the default) instead of a qkv_rope_append launch after it: the same
     * bits, one launch a layer fewer (docs/architecture/decode-fusions.md). The GPU harness switches it off to compare the two.
     */
    public void setQkvRopeInMatmul(boolean on) {
        this.qkvRopeInMatmul = on;
    }

    public boolean qkvRopeInMatmul() {
        return qkvRopeInMatmul;
    }

    /**
     * bf16 matmuls of at most this many rows (decode steps; 0 for none) run on the skinny-matmul kernel instead
     * of cuBLAS; the GPU harness changes it to measure the one against the other on the same model.
     */
    public void setSkinnyMatmulRows(int rows) {
        if (rows < 0 || rows > MAX_SKINNY_MATMUL_ROWS) {
            throw new IllegalArgumentException("skinny matmul rows must be 0.." + MAX_SKINNY_MATMUL_ROWS + ", got "
                    + rows);
        }
        this.skinnyMatmulRows = rows;
    }

    public int skinnyMatmulRows() {
        return skinnyMatmulRows;
    }

    /**
     * On, a row's results are independent of the other rows of its step: matmuls through split-free cuBLASLt
     * algorithms and bf16 attention at the tensor-core head dims through one kernel for prefill and decode rows
     * alike. A request's tokens then do not depend on what it was batched or chunked with, so a request
     * recomputed after a restore continues exactly as the lost run would have. Off (the default), decode rows use
     * the split-KV decode kernel and cuBLAS picks its algorithms freely: faster decode, with tokens that can
     * change when the batching does. fp32 and head dim 32 have no invariant attention path.
     */
    @Override
    public void setBatchInvariant(boolean on) {
        this.batchInvariant = on;
    }

    @Override
    public boolean batchInvariant() {
        return batchInvariant;
    }

    /** Binds the context when a different thread than the last one calls in. */
    void enter() {
        Thread t = Thread.currentThread();
        if (t != boundThread) {
            context.makeCurrent();
            boundThread = t;
        }
    }

    @Override
    public CudaTensor allocate(DType dtype, long... shape) {
        enter();
        long bytes = Arrays.stream(shape).reduce(1, Math::multiplyExact) * dtype.bytes();
        DeviceAllocator.Block b = allocator.allocate(bytes, dtype + Arrays.toString(shape));
        return new CudaTensor(this, dtype, shape, b.pointer(), b);
    }

    @Override
    public CudaTensor zeros(DType dtype, long... shape) {
        CudaTensor t = allocate(dtype, shape);
        check(cuMemsetD8Async(t.pointer(), (byte) 0, t.byteSize(), stream.handle()), "cuMemsetD8Async for zeros");
        return t;
    }

    @Override
    public CudaTensor fromFloats(float[] data, DType dtype, long... shape) {
        if (!dtype.isFloat()) {
            throw new IllegalArgumentException("fromFloats needs a float dtype, got " + dtype);
        }
        CudaTensor t = allocate(dtype, shape);
        checkCount(data.length, t);
        ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(t.byteSize())).order(ByteOrder.LITTLE_ENDIAN);
        for (float f : data) {
            switch (dtype) {
                case F32 -> b.putFloat(f);
                case BF16 -> b.putShort(HalfFloats.floatToBf16(f));
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
        if (!c.dtype().isFloat()) {
            throw new IllegalArgumentException("toFloats needs a float tensor, got " + c.dtype());
        }
        ByteBuffer b = download(c);
        float[] out = new float[Math.toIntExact(c.numel())];
        for (int i = 0; i < out.length; i++) {
            out[i] = switch (c.dtype()) {
                case F32 -> b.getFloat();
                case BF16 -> HalfFloats.bf16ToFloat(b.getShort());
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
        return c.byteSize() > Readbacks.SLOT_BYTES ? Device.super.readIntsLater(c) : readbacks.read(c, stream);
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
        stream.counters().upload(total);
        if (total <= UploadRing.CHUNK_BYTES) {
            uploads.upload(src, (int) total, d.pointer(), stream);
            return;
        }
        ByteBuffer in = src.duplicate();
        int limit = in.limit();
        for (long done = 0; done < total; ) {
            int n = (int) Math.min(STAGING_BYTES, total - done);
            ByteBuffer s = staging(n);
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
        for (long done = 0; done < total; ) {
            int n = (int) Math.min(STAGING_BYTES, total - done);
            ByteBuffer st = staging(n);
            check(cuMemcpyDtoHAsync(staging.pointer(), s.pointer().withByteOffset(done), n, stream.handle()),
                    "cuMemcpyDtoHAsync(" + n + " bytes) from " + s);
            stream.synchronize();
            st.limit(n);
            out.put(st);
            done += n;
        }
    }

    /** The staging buffer, grown to at least {@code bytes}, positioned at 0. */
    private ByteBuffer staging(int bytes) {
        if (staging == null || staging.bytes() < bytes) {
            if (staging != null) {
                staging.close();
            }
            staging = new PinnedBuffer(Math.max(bytes, 1 << 20));
        }
        return staging.buffer();
    }

    @Override
    public void copy(Tensor src, Tensor dst) {
        enter();
        CudaTensor s = CudaTensor.of(src, "copy source");
        CudaTensor d = CudaTensor.of(dst, "copy destination");
        if (s.byteSize() != d.byteSize()) {
            throw new IllegalArgumentException("copy between " + s + " and " + d + " of different byte sizes");
        }
        check(cuMemcpyDtoDAsync(d.pointer(), s.pointer(), s.byteSize(), stream.handle()), "cuMemcpyDtoDAsync");
    }

    /**
     * A constant fp32 table (e.g. RoPE inverse frequencies) copied synchronously outside the stream, so the
     * first use may happen while a CUDA graph is being captured.
     */
    CudaTensor uploadConstant(float[] values) {
        enter();
        DeviceAllocator.Block b = allocator.allocate(values.length * 4L, "constant table");
        check(cuMemcpyHtoD(b.pointer(), Pointer.to(values), values.length * 4L), "cuMemcpyHtoD constant table");
        return new CudaTensor(this, DType.F32, new long[] {values.length}, b.pointer(), b);
    }

    /** A view of the named workspace buffer as a tensor of {@code shape}; valid until the next call for that name. */
    CudaTensor scratch(String name, DType dtype, long... shape) {
        long bytes = Arrays.stream(shape).reduce(1, Math::multiplyExact) * dtype.bytes();
        return new CudaTensor(this, dtype, shape, workspace.get(name, bytes).pointer(), null);
    }

    /**
     * Like {@link #scratch}, but zero when the workspace first hands the buffer out; the kernels that use it
     * must leave it zero again (counters that the last user resets).
     */
    CudaTensor zeroedScratch(String name, DType dtype, long... shape) {
        long bytes = Arrays.stream(shape).reduce(1, Math::multiplyExact) * dtype.bytes();
        DeviceAllocator.Block b = workspace.get(name, bytes);
        if (zeroedBlocks.add(b)) {
            check(cuMemsetD8Async(b.pointer(), (byte) 0, b.bytes(), stream.handle()), "cuMemsetD8Async for " + name);
        }
        return new CudaTensor(this, dtype, shape, b.pointer(), null);
    }

    Kernel kernel(String name) {
        return module.kernel(name);
    }

    void release(DeviceAllocator.Block block) {
        allocator.release(block);
    }

    @Override
    public void close() {
        enter();
        stream.synchronize();
        ops.close();
        workspace.close();
        module.close();
        allocator.close();
        if (staging != null) {
            staging.close();
        }
        uploads.close();
        readbacks.close();
        stream.close();
        context.close();
    }
}
