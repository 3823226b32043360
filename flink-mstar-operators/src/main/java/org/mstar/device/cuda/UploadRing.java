package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuEventCreate;
import static jcuda.driver.JCudaDriver.cuEventDestroy;
import static jcuda.driver.JCudaDriver.cuEventRecord;
import static jcuda.driver.JCudaDriver.cuEventSynchronize;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoDAsync;
import static org.mstar.device.cuda.CudaCheck.check;

import java.nio.ByteBuffer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;

/**
 * Pinned staging for the small host-to-device copies of every step (plans, page tables, positions,
 * sampling parameters), so they enqueue without waiting for the stream: a synchronising upload in the
 * middle of a step drains the GPU and leaves it idle while the host prepares what follows. The ring is
 * cut into chunks filled one after another; leaving a chunk records an event behind its copies, and a
 * chunk is refilled only once its event has passed, so a copy never reads bytes already overwritten.
 * Like every stream operation here it must not run while the stream is being captured into a graph.
 */
final class UploadRing implements AutoCloseable {
    static final int CHUNK_BYTES = 1 << 20;
    private static final int CHUNKS = 4;
    private static final int ALIGN = 16;

    private final PinnedBuffer pinned = new PinnedBuffer((long) CHUNK_BYTES * CHUNKS);
    private final CUevent[] drained = new CUevent[CHUNKS];
    private final boolean[] pending = new boolean[CHUNKS];
    private int chunk;
    private int used;

    UploadRing() {
        for (int i = 0; i < CHUNKS; i++) {
            drained[i] = new CUevent();
            check(cuEventCreate(drained[i], CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate for upload ring");
        }
    }

    /** Enqueues a copy of {@code bytes} bytes from {@code src}'s position to {@code dst}; at most {@link #CHUNK_BYTES}. */
    void upload(ByteBuffer src, int bytes, CUdeviceptr dst, CudaStream stream) {
        if (bytes > CHUNK_BYTES) {
            throw new IllegalArgumentException(bytes + " bytes exceed the upload ring's chunk of " + CHUNK_BYTES);
        }
        if (used + bytes > CHUNK_BYTES) {
            check(cuEventRecord(drained[chunk], stream.handle()), "cuEventRecord for upload ring");
            pending[chunk] = true;
            chunk = (chunk + 1) % CHUNKS;
            used = 0;
            if (pending[chunk]) {
                check(cuEventSynchronize(drained[chunk]), "cuEventSynchronize for upload ring");
                pending[chunk] = false;
            }
        }
        int at = chunk * CHUNK_BYTES + used;
        ByteBuffer in = src.duplicate();
        in.limit(in.position() + bytes);
        pinned.buffer().position(at).put(in);
        check(cuMemcpyHtoDAsync(dst, pinned.pointer().withByteOffset(at), bytes, stream.handle()),
                "cuMemcpyHtoDAsync(" + bytes + " bytes) from the upload ring");
        used += (bytes + ALIGN - 1) / ALIGN * ALIGN;
    }

    @Override
    public void close() {
        for (CUevent e : drained) {
            check(cuEventDestroy(e), "cuEventDestroy for upload ring");
        }
        pinned.close();
    }
}
