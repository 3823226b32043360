package org.mstar.device.cuda;

import org.mstar.device.DeviceFault;

/** A failed CUDA driver or cuBLAS call; the message names the call, the op and the driver's error name. */
public final class CudaException extends DeviceFault {
    public CudaException(String message) {
        super(message);
    }
}
