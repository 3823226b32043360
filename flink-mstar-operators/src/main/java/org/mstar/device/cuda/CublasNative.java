package org.mstar.device.cuda;

import jcuda.NativePointerObject;
import jcuda.Pointer;

/**
 * The JNI entry points of kernels/src/main/c/cublas_shim.c in {@link NativeShim}. Device addresses are
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

    /** cublasGemmStridedBatchedEx with fp32 compute: batchCount products, each operand advanced by its stride. */
    static native void gemmStridedBatchedEx(long handle, int transa, int transb, int m, int n, int k, float alpha,
                                            Pointer a, int aType, int lda, long strideA, Pointer b, int bType, int ldb,
                                            long strideB, float beta, Pointer c, int cType, int ldc, long strideC,
                                            int batchCount);

    /** dlopens the first loadable cuBLASLt candidate exporting the needed symbols; UnsatisfiedLinkError when none. */
    static native String ltOpen(String[] candidates);

    static native long ltCreate();

    static native void ltDestroy(long handle);

    /**
     * A plan for column-major {@code c[m, n] = a[k, m]ᵀ · b[k, n]} (a and b of {@code abType}, c of {@code cType},
     * fp32 compute) whose algorithm walks K whole: no split-K, so a column of c (a row of the caller's row-major
     * output) has the same bits whatever n is. Throws when cuBLASLt offers no such algorithm.
     */
    static native long ltPlan(long handle, int abType, int cType, int m, int n, int k, long workspaceBytes);

    /** How many split-free algorithms the plan holds (at least one), in cuBLASLt's estimated order. */
    static native int ltCandidates(long plan);

    /** Makes candidate {@code index} the plan's algorithm. */
    static native void ltChoose(long plan, int index);

    /** Gives {@code plan} the algorithm of {@code from} if cuBLASLt accepts it for the plan's shape; says whether. */
    static native boolean ltAdopt(long handle, long plan, long from, long workspaceBytes);

    static native void ltPlanFree(long plan);

    /**
     * A plan for the FP8 product {@code d[m, n] = Σ_k a[k, m] · b[k, n]} (column-major; a and b E4M3, d fp32, fp32
     * accumulation), unscaled; the algorithm is cuBLASLt's first choice for the shape. Throws when cuBLASLt has none
     * (a GPU without FP8).
     */
    static native long ltFp8Plan(long handle, int m, int n, int k, long workspaceBytes);

    static native void ltFp8PlanFree(long plan);

    /** Runs an {@link #ltFp8Plan}. */
    static native void ltFp8Matmul(long handle, long plan, Pointer a, Pointer b, Pointer d, Pointer workspace,
                                   long workspaceBytes, NativePointerObject stream);

    static native void ltMatmul(long handle, long plan, Pointer a, Pointer b, Pointer c, Pointer workspace,
                                long workspaceBytes, NativePointerObject stream);
}
