package org.mstar.device.cuda;

/**
 * A cuBLAS handle bound to one device stream, with its own workspace (cuBLAS must not allocate while a
 * CUDA graph is captured). The JNI shim ({@link NativeShim}) dlopens libcublas.so.13, falling back to .so.12,
 * so the library's folder must be on the loader path.
 */
final class Cublas implements AutoCloseable {
    private static final String[] LIBRARIES = {"libcublas.so.13", "libcublas.so.12"};
    static final long WORKSPACE_BYTES = 32L << 20;

    private static String library;

    private final long handle;

    Cublas(CudaStream stream, CudaTensor workspace) {
        load();
        this.handle = CublasNative.create();
        CublasNative.setStream(handle, stream.handle());
        CublasNative.setWorkspace(handle, workspace.pointer(), workspace.byteSize());
    }

    /** The libcublas this JVM loaded, e.g. "libcublas.so.13". */
    static synchronized String load() {
        if (library == null) {
            NativeShim.load();
            try {
                library = CublasNative.open(LIBRARIES);
            } catch (UnsatisfiedLinkError e) {
                throw new IllegalStateException("matmul needs cuBLAS and none could be loaded: " + e.getMessage()
                        + ". Put the folder holding libcublas.so.13 on LD_LIBRARY_PATH.", e);
            }
        }
        return library;
    }

    int version() {
        return CublasNative.version(handle);
    }

    /**
     * Row-major {@code c[rows, cols] = a[rows, k] · b[cols, k]ᵀ}, which cuBLAS (column-major) computes as
     * {@code cᵀ = bᵀ·a} with b transposed: m = cols, n = rows.
     */
    void gemmRowsByWeightT(CudaTensor a, int aType, CudaTensor b, int bType, CudaTensor c, int cType, int rows, int cols,
                           int k) {
        CublasNative.gemmEx(handle, CublasNative.OP_T, CublasNative.OP_N, cols, rows, k, 1f, b.pointer(), bType, k,
                a.pointer(), aType, k, 0f, c.pointer(), cType, cols);
    }

    /**
     * {@link #gemmRowsByWeightT} for {@code batches} products at once: product i reads {@code a} and {@code b} and
     * writes {@code c} from element {@code i·aStride}, {@code i·bStride} and {@code i·cStride} on.
     */
    void gemmRowsByWeightTBatched(CudaTensor a, int aType, long aStride, CudaTensor b, int bType, long bStride,
                                  CudaTensor c, int cType, long cStride, int rows, int cols, int k, int batches) {
        CublasNative.gemmStridedBatchedEx(handle, CublasNative.OP_T, CublasNative.OP_N, cols, rows, k, 1f, b.pointer(),
                bType, k, bStride, a.pointer(), aType, k, aStride, 0f, c.pointer(), cType, cols, cStride, batches);
    }

    /**
     * Per head h below {@code heads}, row-major {@code c_h[rows, cols] = a_h[rows, k] · b_h}, with b_h {@code [k, cols]}
     * or, {@code bTransposed}, {@code [cols, k]} used transposed; a_h, b_h and c_h start at element h times their
     * stride (b_h after {@code bOffset} more), their rows {@code ld} elements apart. bf16 operands, fp32 sums, one
     * strided batched call: cuBLAS sees {@code c_hᵀ = op(b_h)ᵀ · a_hᵀ} column-major, m = cols and n = rows.
     */
    void gemmPerHead(CudaTensor a, long lda, long strideA, CudaTensor b, long bOffset, long ldb, long strideB,
                     boolean bTransposed, CudaTensor c, long ldc, long strideC, int rows, int cols, int k, int heads) {
        int bf16 = CublasNative.R_16BF;
        CublasNative.gemmStridedBatchedEx(handle, bTransposed ? CublasNative.OP_T : CublasNative.OP_N,
                CublasNative.OP_N, cols, rows, k, 1f, b.pointer().withByteOffset(bOffset * 2), bf16,
                Math.toIntExact(ldb), strideB, a.pointer(), bf16, Math.toIntExact(lda), strideA, 0f, c.pointer(), bf16,
                Math.toIntExact(ldc), strideC, heads);
    }

    @Override
    public void close() {
        CublasNative.destroy(handle);
    }
}
