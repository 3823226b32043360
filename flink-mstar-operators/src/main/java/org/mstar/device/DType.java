package org.mstar.device;

/**
 * Element types of device tensors. bf16 and f16 are storage types; arithmetic accumulates in fp32. F8_E4M3 holds
 * {@link Float8E4m3} codes, one byte each: only a KV pool is stored in it (quantised on write, widened on read), so it
 * is not one of the float types that general ops take.
 */
public enum DType {
    F32(4), BF16(2), F16(2), I32(4), I64(8), U8(1), F8_E4M3(1);

    private final int bytes;

    DType(int bytes) {
        this.bytes = bytes;
    }

    public int bytes() {
        return bytes;
    }

    public boolean isFloat() {
        return this == F32 || this == BF16 || this == F16;
    }
}
