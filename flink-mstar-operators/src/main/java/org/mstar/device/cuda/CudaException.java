package org.mstar.device.cuda;

/** A failed CUDA driver or cuBLAS call; the message names the call, the op and the driver's error name. */
public final class CudaException extends RuntimeException {
    public CudaException(String message) {
        super(message);
    }
}
