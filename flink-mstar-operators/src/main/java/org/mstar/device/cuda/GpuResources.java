package org.mstar.device.cuda;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;

/**
 * What a {@link CudaDevice} and its views ({@link CudaDevice#withOptions}) share: one GPU's primary context and the
 * thread it was last made current on, the stream every transfer and op is enqueued on, the allocator and workspace,
 * the kernels module, the upload ring, readback slots and staging buffer. Shared rather than copied, so work through
 * any view is ordered on the one stream and memory freed through one is reused by all. The device that opened the
 * GPU closes it.
 */
final class GpuResources {
    /**
     * The GPU whose context each thread made current last: one thread may drive several GPUs (loading a
     * tensor-parallel group's shards, summing its partials), so "this thread used this GPU before" is not enough.
     */
    private static final ThreadLocal<GpuResources> CURRENT = new ThreadLocal<>();

    private final CudaContext context;
    private final CudaStream stream;
    private final DeviceAllocator allocator;
    private final Workspace workspace;
    private final KernelModule module;
    private final UploadRing uploads;
    private final Readbacks readbacks = new Readbacks();
    /** Workspace blocks handed out zeroed (they are never freed before the GPU closes). */
    private final Set<DeviceAllocator.Block> zeroedBlocks = Collections.newSetFromMap(new IdentityHashMap<>());
    private PinnedBuffer staging;

    GpuResources(int gpuIndex) {
        this.context = new CudaContext(gpuIndex);
        CURRENT.set(this);
        this.stream = new CudaStream();
        this.allocator = new DeviceAllocator(stream.counters());
        this.workspace = new Workspace(allocator);
        this.uploads = new UploadRing();
        this.module = new KernelModule();
    }

    CudaContext context() {
        return context;
    }

    CudaStream stream() {
        return stream;
    }

    DeviceAllocator allocator() {
        return allocator;
    }

    Workspace workspace() {
        return workspace;
    }

    KernelModule module() {
        return module;
    }

    UploadRing uploads() {
        return uploads;
    }

    Readbacks readbacks() {
        return readbacks;
    }

    /** Makes the context current on the calling thread, unconditionally (another device may have replaced it). */
    void bindToCurrentThread() {
        context.makeCurrent();
        CURRENT.set(this);
    }

    /** Binds the context when the calling thread last made another GPU's current, or none. */
    void enter() {
        if (CURRENT.get() != this) {
            bindToCurrentThread();
        }
    }

    /** Whether {@code block} is handed out zeroed for the first time (the caller zeroes it), recording that it is. */
    boolean firstZeroing(DeviceAllocator.Block block) {
        return zeroedBlocks.add(block);
    }

    /** The pinned staging buffer, grown to at least {@code bytes}. */
    PinnedBuffer staging(int bytes) {
        if (staging == null || staging.bytes() < bytes) {
            if (staging != null) {
                staging.close();
            }
            staging = new PinnedBuffer(Math.max(bytes, 1 << 20));
        }
        return staging;
    }

    /** Frees everything; the stream must be idle (the owning device synchronises first). */
    void close() {
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
