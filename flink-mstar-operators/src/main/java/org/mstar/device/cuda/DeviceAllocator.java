package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuMemAlloc;
import static jcuda.driver.JCudaDriver.cuMemFree;
import static org.mstar.device.cuda.CudaCheck.check;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUresult;

/**
 * Device memory with reuse: freed blocks wait in per-size-class free lists and are handed out again without
 * a driver call (cuMemAlloc/cuMemFree synchronise the device). All work runs on one stream, so a block freed
 * after being used by enqueued work can be reused by later work on that stream without waiting.
 */
final class DeviceAllocator implements AutoCloseable {
    private static final long SMALL_GRAIN = 512;
    private static final long LARGE_GRAIN = 2L << 20;

    /** A block of device memory of {@code bytes} (its size class, at least what was asked). */
    record Block(CUdeviceptr pointer, long bytes) {}

    private final Map<Long, ArrayDeque<CUdeviceptr>> free = new HashMap<>();
    private final StreamCounters counters;
    private long bytesInUse;
    private long bytesCached;

    DeviceAllocator(StreamCounters counters) {
        this.counters = counters;
    }

    /** Size classes: multiples of 512 B below 1 MiB, of 2 MiB above, so a freed block fits similar requests. */
    static long sizeClass(long bytes) {
        long b = Math.max(bytes, 1);
        long grain = b < (1L << 20) ? SMALL_GRAIN : LARGE_GRAIN;
        return (b + grain - 1) / grain * grain;
    }

    Block allocate(long bytes, String purpose) {
        long size = sizeClass(bytes);
        ArrayDeque<CUdeviceptr> list = free.get(size);
        if (list != null && !list.isEmpty()) {
            bytesCached -= size;
            bytesInUse += size;
            return new Block(list.pop(), size);
        }
        CUdeviceptr p = new CUdeviceptr();
        counters.driverAlloc();
        int rc = cuMemAlloc(p, size);
        if (rc == CUresult.CUDA_ERROR_OUT_OF_MEMORY && bytesCached > 0) {
            releaseCached();
            rc = cuMemAlloc(p, size);
        }
        check(rc, "cuMemAlloc(" + size + " bytes) for " + purpose + " (in use " + bytesInUse + " bytes)");
        bytesInUse += size;
        return new Block(p, size);
    }

    void release(Block block) {
        free.computeIfAbsent(block.bytes(), k -> new ArrayDeque<>()).push(block.pointer());
        bytesInUse -= block.bytes();
        bytesCached += block.bytes();
    }

    /** Returns every cached block to the driver. */
    void releaseCached() {
        for (ArrayDeque<CUdeviceptr> list : free.values()) {
            for (CUdeviceptr p : list) {
                check(cuMemFree(p), "cuMemFree");
            }
        }
        free.clear();
        bytesCached = 0;
    }

    @Override
    public void close() {
        releaseCached();
    }
}
