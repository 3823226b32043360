package org.mstar.device.cuda;

import jcuda.NativePointerObject;
import jcuda.Pointer;

/**
 * The JNI entry points of libmstar_cublas.so (kernels/src/main/c/cublas_shim.c). Device addresses are
 * read from the JCuda objects by the shim. Every call throws IllegalStateException on a cuBLAS error.
 */
final class CublasNative {
    /** cudaDataType codes. */
    static final int R_32F = 0;
    static final int R_16F = 2;
    static final int R_16BF = 14;
    /** cublasOperation_t. */
    static final int OP_N = 0;
    static final int OP_T = 1;

    private CublasNative() {}

    /** dlopens the first loadable candidate exporting the needed symbols; UnsatisfiedLinkError when none. */
    static native String open(String[] candidates);

    static native long create();

    static native void destroy(long handle);

    static native void setStream(long handle, NativePointerObject stream);

    static native void setWorkspace(long handle, Pointer workspace, long bytes);

    static native int version(long handle);

    /** cublasGemmEx with fp32 compute, column-major as cuBLAS defines it. */
    static native void gemmEx(long handle, int transa, int transb, int m, int n, int k, float alpha, Pointer a,
                              int aType, int lda, Pointer b, int bType, int ldb, float beta, Pointer c, int cType,
                              int ldc);
}
