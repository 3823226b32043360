package org.mstar.device;

/**
 * Byte ranges to copy from one tensor to another: range i is {@code lengths[i]} bytes from {@code sources[i]} of the
 * source to {@code targets[i]} of the target ({@link Device#copyFrom}).
 */
public record ByteRanges(long[] sources, long[] targets, long[] lengths) {

    /** @throws IllegalArgumentException when the arrays differ in length or a length is not positive */
    public ByteRanges {
        if (sources.length != targets.length || sources.length != lengths.length) {
            throw new IllegalArgumentException(sources.length + " sources, " + targets.length + " targets and "
                    + lengths.length + " lengths");
        }
        for (long n : lengths) {
            if (n <= 0) {
                throw new IllegalArgumentException("a range of " + n + " bytes");
            }
        }
    }

    public int size() {
        return lengths.length;
    }

    /**
     * @throws IllegalArgumentException when a range leaves {@code src} or {@code dst}, or, for {@code elementBytes} > 1,
     *     does not start and end on an element of both
     */
    public void requireWithin(Tensor src, Tensor dst, int elementBytes) {
        long srcBytes = src.byteSize();
        long dstBytes = dst.byteSize();
        for (int i = 0; i < size(); i++) {
            if (sources[i] < 0 || targets[i] < 0 || sources[i] + lengths[i] > srcBytes
                    || targets[i] + lengths[i] > dstBytes || (sources[i] | targets[i] | lengths[i]) % elementBytes != 0) {
                throw new IllegalArgumentException("range " + i + " (" + lengths[i] + " bytes from " + sources[i]
                        + " to " + targets[i] + ") does not fit " + src + " and " + dst + " in elements of "
                        + elementBytes + " bytes");
            }
        }
    }
}
