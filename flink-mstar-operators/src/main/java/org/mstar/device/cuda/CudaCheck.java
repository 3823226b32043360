package org.mstar.device.cuda;

import jcuda.driver.CUresult;

/** Turns driver return codes into exceptions that say which call failed and on behalf of what. */
final class CudaCheck {
    private CudaCheck() {}

    /** @param what the call and its context, e.g. {@code "cuMemAlloc(4096 bytes) for rmsNorm"} */
    static void check(int result, String what) {
        if (result != CUresult.CUDA_SUCCESS) {
            throw new CudaException(what + " failed: " + CUresult.stringFor(result) + " (" + result + ")");
        }
    }
}
