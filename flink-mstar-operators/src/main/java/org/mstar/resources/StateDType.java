package org.mstar.resources;

/**
 * The element type a recurrent state is stored in, declared without the device layer: the SSM state is usually kept
 * in F32 whatever the weights, since it accumulates over the whole sequence; the convolution window may follow the
 * model's dtype.
 */
public enum StateDType {
    F32(4), BF16(2), F16(2);

    private final int bytes;

    StateDType(int bytes) {
        this.bytes = bytes;
    }

    public int bytes() {
        return bytes;
    }
}
