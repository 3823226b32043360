package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuStreamIsCapturing;
import static org.mstar.device.cuda.CudaCheck.check;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import jcuda.driver.CUstreamCaptureStatus;
import org.mstar.device.DType;

/**
 * Batch-invariant matmuls through cuBLASLt. cuBLAS chooses its algorithm from the row count, and for few rows
 * it often splits the K walk and sums the parts, so the same input row gets other bits in a batch of 64 than
 * alone (measured on an H200 for Llama-3.1-8B's o and down projections). Here every shape gets an algorithm
 * that walks K whole: a row's result then depends on that row only, which is what makes a request's tokens
 * independent of the requests it was batched with.
 *
 * <p>Without split-K, Lt's first choice for few rows can be ten times slower than cuBLAS (few blocks walking a
 * long K). So for up to {@value #TUNED_ROWS} rows the split-free candidates are timed once per power-of-two
 * row count and the fastest serves every row count up to it; above, Lt's first choice is as fast as cuBLAS.
 * A plan first met while a CUDA graph is being captured cannot be timed: it uses Lt's first choice and is not
 * kept, so a later eager call times it.
 */
final class CublasLt implements AutoCloseable {
    private static final String[] LIBRARIES = {"libcublasLt.so.13", "libcublasLt.so.12"};
    static final int TUNED_ROWS = 256;
    private static final int TIMED_RUNS = 3;

    private static String library;

    private record Shape(DType dtype, int cType, int rows, int cols, int k) {
        Shape withRows(int r) {
            return new Shape(dtype, cType, r, cols, k);
        }
    }

    private final CudaDevice device;
    private final CudaTensor workspace;
    private final long handle;
    private final Map<Shape, Long> plans = new HashMap<>();
    /** Plans made during a capture: not kept for later calls, freed with the rest. */
    private final List<Long> capturedPlans = new ArrayList<>();

    CublasLt(CudaDevice device, CudaTensor workspace) {
        load();
        this.device = device;
        this.workspace = workspace;
        this.handle = CublasNative.ltCreate();
    }

    /** The libcublasLt this JVM loaded, e.g. "libcublasLt.so.13". */
    static synchronized String load() {
        if (library == null) {
            Cublas.load();
            try {
                library = CublasNative.ltOpen(LIBRARIES);
            } catch (UnsatisfiedLinkError e) {
                throw new IllegalStateException("batch-invariant matmul needs cuBLASLt and none could be loaded: "
                        + e.getMessage() + ". Put the folder holding libcublasLt.so.13 on LD_LIBRARY_PATH.", e);
            }
        }
        return library;
    }

    /** Row-major {@code c[rows, cols] = a[rows, k] · b[cols, k]ᵀ}, as {@link Cublas#gemmRowsByWeightT}. */
    void gemmRowsByWeightT(CudaTensor a, CudaTensor b, DType dtype, CudaTensor c, int cType, int rows, int cols, int k) {
        long plan = plan(new Shape(dtype, cType, rows, cols, k), b);
        run(plan, a, b, c);
    }

    private void run(long plan, CudaTensor a, CudaTensor b, CudaTensor c) {
        CublasNative.ltMatmul(handle, plan, b.pointer(), a.pointer(), c.pointer(), workspace.pointer(),
                workspace.byteSize(), device.stream().handle());
    }

    private long plan(Shape s, CudaTensor weight) {
        Long cached = plans.get(s);
        if (cached != null) {
            return cached;
        }
        long plan = newPlan(s);
        if (capturing()) {
            capturedPlans.add(plan);
            return plan;
        }
        if (s.rows() <= TUNED_ROWS) {
            int bucket = Integer.highestOneBit(s.rows()) == s.rows() ? s.rows() : Integer.highestOneBit(s.rows()) << 1;
            if (bucket == s.rows()) {
                tune(plan, s, weight);
            } else if (!CublasNative.ltAdopt(handle, plan, plan(s.withRows(bucket), weight), workspace.byteSize())) {
                tune(plan, s, weight);
            }
        }
        plans.put(s, plan);
        return plan;
    }

    private long newPlan(Shape s) {
        int abType = CudaMatmul.cudaType(s.dtype());
        return CublasNative.ltPlan(handle, abType, s.cType(), s.cols(), s.rows(), s.k(), workspace.byteSize());
    }

    /** Times every candidate on scratch rows against the real weight and keeps the fastest. */
    private void tune(long plan, Shape s, CudaTensor weight) {
        int candidates = CublasNative.ltCandidates(plan);
        if (candidates == 1) {
            return;
        }
        CudaTensor a = device.scratch("lt.tune.a", s.dtype(), (long) s.rows() * s.k());
        CudaTensor c = device.scratch("lt.tune.c", CudaMatmul.dtypeOf(s.cType()), (long) s.rows() * s.cols());
        int best = 0;
        float bestMillis = Float.MAX_VALUE;
        try (CudaEvent start = new CudaEvent(); CudaEvent end = new CudaEvent()) {
            for (int i = 0; i < candidates; i++) {
                CublasNative.ltChoose(plan, i);
                run(plan, a, weight, c);
                start.record(device.stream());
                for (int r = 0; r < TIMED_RUNS; r++) {
                    run(plan, a, weight, c);
                }
                end.record(device.stream());
                float ms = end.millisSince(start);
                if (ms < bestMillis) {
                    bestMillis = ms;
                    best = i;
                }
            }
        }
        CublasNative.ltChoose(plan, best);
    }

    private boolean capturing() {
        int[] status = new int[1];
        check(cuStreamIsCapturing(device.stream().handle(), status), "cuStreamIsCapturing");
        return status[0] != CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE;
    }

    @Override
    public void close() {
        plans.values().forEach(CublasNative::ltPlanFree);
        capturedPlans.forEach(CublasNative::ltPlanFree);
        plans.clear();
        capturedPlans.clear();
        CublasNative.ltDestroy(handle);
    }
}
