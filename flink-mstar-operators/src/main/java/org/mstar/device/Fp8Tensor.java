package org.mstar.device;

/**
 * A tensor held as FP8: E4M3 codes ({@link Float8E4m3}) with the fp32 scales that decode them. As a {@link Tensor} it
 * has the codes' shape and dtype {@link DType#U8}, lives on their device, takes the bytes of codes and scales together
 * and {@link #close() frees} both; what a scale covers is the implementation's.
 */
public sealed interface Fp8Tensor extends Tensor permits Fp8Rows, Fp8Weight {
    /** U8: the E4M3 codes, in this tensor's shape. */
    Tensor codes();

    /** F32: the scales. */
    Tensor scales();

    @Override
    default DType dtype() {
        return DType.U8;
    }

    @Override
    default long[] shape() {
        return codes().shape();
    }

    @Override
    default Device device() {
        return codes().device();
    }

    @Override
    default long byteSize() {
        return codes().byteSize() + scales().byteSize();
    }

    @Override
    default void close() {
        codes().close();
        scales().close();
    }
}
