package org.mstar.device.cuda;

import java.util.Arrays;
import jcuda.driver.CUdeviceptr;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;

/**
 * A tensor in device memory. The tensor returned by allocation owns its block and returns it to the
 * allocator on {@link #close()}; views ({@link #rows}, {@link #reshape}) share the block and closing
 * them does nothing.
 */
public final class CudaTensor implements Tensor {
    private final CudaDevice device;
    private final DType dtype;
    private final long[] shape;
    private final CUdeviceptr pointer;
    private final DeviceAllocator.Block owned;
    /** Bytes from the start of the driver allocation (views made by {@link #rows}); allocations are 256-aligned. */
    private final long byteOffset;
    private boolean closed;

    CudaTensor(CudaDevice device, DType dtype, long[] shape, CUdeviceptr pointer, DeviceAllocator.Block owned) {
        this(device, dtype, shape, pointer, owned, 0);
    }

    private CudaTensor(CudaDevice device, DType dtype, long[] shape, CUdeviceptr pointer, DeviceAllocator.Block owned,
                       long byteOffset) {
        this.device = device;
        this.dtype = dtype;
        this.shape = shape.clone();
        this.pointer = pointer;
        this.owned = owned;
        this.byteOffset = byteOffset;
    }

    /** The CUDA tensor behind {@code t}, or a clear error for a tensor of another device. */
    static CudaTensor of(Tensor t, String what) {
        if (t instanceof CudaTensor c) {
            if (c.closed) {
                throw new IllegalStateException(what + " was closed");
            }
            return c;
        }
        throw new IllegalArgumentException(what + ": expected a CUDA tensor, got "
                + (t == null ? "null" : "one on " + t.device().name()));
    }

    /** {@link #of} for optional arguments: null stays null. */
    static CudaTensor ofNullable(Tensor t, String what) {
        return t == null ? null : of(t, what);
    }

    /** Whether the first element's address is a multiple of {@code bytes} (a power of two up to 256). */
    boolean alignedTo(int bytes) {
        return byteOffset % bytes == 0;
    }

    /** Device address of the first element. */
    public CUdeviceptr pointer() {
        return pointer;
    }

    @Override
    public DType dtype() {
        return dtype;
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public Tensor rows(long firstRow, long rows) {
        if (shape.length == 0 || firstRow < 0 || rows < 0 || firstRow + rows > shape[0]) {
            throw new IndexOutOfBoundsException("rows [" + firstRow + ", " + (firstRow + rows) + ") of shape "
                    + Arrays.toString(shape));
        }
        long rowBytes = shape[0] == 0 ? 0 : byteSize() / shape[0];
        long[] s = shape.clone();
        s[0] = rows;
        return new CudaTensor(device, dtype, s, pointer.withByteOffset(firstRow * rowBytes), null,
                byteOffset + firstRow * rowBytes);
    }

    @Override
    public Tensor reshape(long... newShape) {
        long n = Arrays.stream(newShape).reduce(1, Math::multiplyExact);
        if (n != numel()) {
            throw new IllegalArgumentException("cannot reshape " + Arrays.toString(shape) + " to "
                    + Arrays.toString(newShape));
        }
        return new CudaTensor(device, dtype, newShape, pointer, null, byteOffset);
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            if (owned != null) {
                device.release(owned);
            }
        }
    }

    @Override
    public String toString() {
        return "CudaTensor" + Arrays.toString(shape) + " " + dtype;
    }
}
