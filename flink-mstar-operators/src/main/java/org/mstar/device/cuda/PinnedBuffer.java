package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuMemFreeHost;
import static jcuda.driver.JCudaDriver.cuMemHostAlloc;
import static org.mstar.device.cuda.CudaCheck.check;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jcuda.Pointer;

/** Page-locked host memory: the copy engines read and write it directly, so async copies really overlap. */
public final class PinnedBuffer implements AutoCloseable {
    private final Pointer host = new Pointer();
    private final long bytes;
    private final ByteBuffer buffer;
    private boolean closed;

    public PinnedBuffer(long bytes) {
        if (bytes <= 0 || bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("pinned buffer size " + bytes + " outside (0, 2^31)");
        }
        check(cuMemHostAlloc(host, bytes, 0), "cuMemHostAlloc(" + bytes + " bytes)");
        this.bytes = bytes;
        this.buffer = host.getByteBuffer(0, bytes).order(ByteOrder.LITTLE_ENDIAN);
    }

    public long bytes() {
        return bytes;
    }

    /** A little-endian view of the whole buffer (position 0, limit = size). */
    public ByteBuffer buffer() {
        return buffer.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    }

    Pointer pointer() {
        return host;
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            check(cuMemFreeHost(host), "cuMemFreeHost");
        }
    }
}
