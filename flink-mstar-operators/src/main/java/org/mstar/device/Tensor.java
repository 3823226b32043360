package org.mstar.device;

import java.util.Arrays;

/**
 * A dense, row-major, contiguous array on one {@link Device}. Shapes are fixed; ops read and write
 * tensors in place. {@link #close()} returns the memory to the device (a no-op for the CPU device).
 */
public interface Tensor extends AutoCloseable {
    DType dtype();

    /** A copy of the shape. */
    long[] shape();

    Device device();

    default int rank() {
        return shape().length;
    }

    default long dim(int i) {
        long[] s = shape();
        return s[i < 0 ? s.length + i : i];
    }

    default long numel() {
        return Arrays.stream(shape()).reduce(1, Math::multiplyExact);
    }

    default long byteSize() {
        return numel() * dtype().bytes();
    }

    /**
     * A view of {@code rows} leading-dimension rows starting at {@code firstRow}, sharing storage; the
     * other dimensions are unchanged.
     */
    Tensor rows(long firstRow, long rows);

    /** A view with a new shape over the same elements (same element count). */
    Tensor reshape(long... shape);

    @Override
    void close();
}
