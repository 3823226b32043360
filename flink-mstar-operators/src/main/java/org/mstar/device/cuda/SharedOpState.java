package org.mstar.device.cuda;

import org.mstar.device.DType;

/**
 * What the ops of a {@link CudaDevice} and of its views share: the cuBLAS handle, the cuBLASLt handle with the plans
 * it tuned, and the RoPE tables. Made through the device that opened the GPU (the libraries on first use), so a view
 * neither tunes nor uploads again; that device closes them.
 */
final class SharedOpState {
    private final CudaDevice device;
    private final RopeTables ropeTables;
    private Cublas cublas;
    private CublasLt cublasLt;

    SharedOpState(CudaDevice device) {
        this.device = device;
        this.ropeTables = new RopeTables(device);
    }

    Cublas cublas() {
        if (cublas == null) {
            cublas = new Cublas(device.stream(), workspace());
        }
        return cublas;
    }

    CublasLt cublasLt() {
        if (cublasLt == null) {
            cublasLt = new CublasLt(device, workspace());
        }
        return cublasLt;
    }

    /** One workspace for both libraries: they run in order on the device's one stream. */
    private CudaTensor workspace() {
        return device.scratch("cublas", DType.U8, Cublas.WORKSPACE_BYTES);
    }

    RopeTables ropeTables() {
        return ropeTables;
    }

    void close() {
        if (cublas != null) {
            cublas.close();
        }
        if (cublasLt != null) {
            cublasLt.close();
        }
        ropeTables.close();
    }
}
