package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuCtxSetCurrent;
import static jcuda.driver.JCudaDriver.cuDeviceGet;
import static jcuda.driver.JCudaDriver.cuDeviceGetAttribute;
import static jcuda.driver.JCudaDriver.cuDeviceGetCount;
import static jcuda.driver.JCudaDriver.cuDeviceGetName;
import static jcuda.driver.JCudaDriver.cuDevicePrimaryCtxRelease;
import static jcuda.driver.JCudaDriver.cuDevicePrimaryCtxRetain;
import static jcuda.driver.JCudaDriver.cuDeviceTotalMem;
import static jcuda.driver.JCudaDriver.cuInit;
import static org.mstar.device.cuda.CudaCheck.check;

import java.nio.charset.StandardCharsets;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdevice_attribute;
import jcuda.driver.JCudaDriver;

/**
 * The primary context of one GPU. The primary context is the one the CUDA runtime (and so cuBLAS) also
 * uses, so memory allocated through the driver API here is valid in cuBLAS calls.
 */
public final class CudaContext implements AutoCloseable {
    private static boolean driverReady;

    private final int index;
    private final CUdevice device = new CUdevice();
    private final CUcontext context = new CUcontext();
    private final String deviceName;
    private final int multiprocessors;
    private final int computeCapability;
    private final long totalMemory;
    private boolean closed;

    public CudaContext(int index) {
        initDriver();
        int count = deviceCount();
        if (index < 0 || index >= count) {
            throw new IllegalArgumentException("GPU index " + index + " out of range: " + count + " CUDA device(s)");
        }
        this.index = index;
        check(cuDeviceGet(device, index), "cuDeviceGet(" + index + ")");
        check(cuDevicePrimaryCtxRetain(context, device), "cuDevicePrimaryCtxRetain(cuda:" + index + ")");
        makeCurrent();
        byte[] name = new byte[256];
        check(cuDeviceGetName(name, name.length, device), "cuDeviceGetName");
        int len = 0;
        while (len < name.length && name[len] != 0) {
            len++;
        }
        this.deviceName = new String(name, 0, len, StandardCharsets.US_ASCII);
        this.multiprocessors = attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
        this.computeCapability = 10 * attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
                + attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
        long[] mem = new long[1];
        check(cuDeviceTotalMem(mem, device), "cuDeviceTotalMem");
        this.totalMemory = mem[0];
    }

    private static synchronized void initDriver() {
        if (!driverReady) {
            JCudaDriver.setExceptionsEnabled(false);
            check(cuInit(0), "cuInit");
            driverReady = true;
        }
    }

    /** Number of CUDA devices visible to this process. */
    public static int deviceCount() {
        initDriver();
        int[] n = new int[1];
        check(cuDeviceGetCount(n), "cuDeviceGetCount");
        return n[0];
    }

    private int attribute(int attr) {
        int[] v = new int[1];
        check(cuDeviceGetAttribute(v, attr, device), "cuDeviceGetAttribute(" + attr + ")");
        return v[0];
    }

    /** Binds this context to the calling thread (driver contexts are per thread). */
    public void makeCurrent() {
        check(cuCtxSetCurrent(context), "cuCtxSetCurrent(cuda:" + index + ")");
    }

    /** The driver context, for calls that name one (peer copies between GPUs). */
    CUcontext handle() {
        return context;
    }

    public int index() {
        return index;
    }

    public String deviceName() {
        return deviceName;
    }

    public int multiprocessors() {
        return multiprocessors;
    }

    /** e.g. 90 for sm_90. */
    public int computeCapability() {
        return computeCapability;
    }

    /**
     * Whether the fatbin's sm_90a machine code, the only code with Hopper's warpgroup products (wgmma), runs here:
     * compute capability 9.0 exactly (elsewhere the compute_90 PTX runs, in which those kernels compile to nothing).
     */
    public boolean hasWarpgroupProducts() {
        return computeCapability == 90;
    }

    public long totalMemory() {
        return totalMemory;
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            check(cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease(cuda:" + index + ")");
        }
    }
}
