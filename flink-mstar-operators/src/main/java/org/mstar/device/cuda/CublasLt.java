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
 * long K). So for up to {@value #TUNED_ROWS} rows the split-free candidates are timed per power-of-two row
 * count, every bucket of a weight shape the first time the shape is met, and a bucket's fastest serves every
 * row count up to it; above, Lt's first choice is as fast as cuBLAS. Nothing can be timed while a CUDA graph
 * is captured: a shape first met there with no tuned bucket uses Lt's first choice and is not kept.
 *
 * <p>It also runs the FP8 × FP8 products of W8A8 weights ({@link #fp8GemmRowsByWeightT}, unscaled into fp32),
 * cuBLAS's only FP8 path: their algorithm is Lt's first choice for each shape, kept per shape, as is a refusal (the
 * caller then takes another path).
 */
final class CublasLt implements AutoCloseable {
    private static final String[] LIBRARIES = {"libcublasLt.so.13", "libcublasLt.so.12"};
    static final int TUNED_ROWS = 256;
    private static final int TIMED_RUNS = 3;

    private static String library;

    private record Shape(DType operands, DType result, int rows, int cols, int k) {
        Shape withRows(int r) {
            return new Shape(operands, result, r, cols, k);
        }
    }

    /** An FP8 product's shape: its tokens, weight rows and depth. */
    private record Fp8Shape(int rows, int cols, int k) {}

    private final CudaDevice device;
    private final CudaTensor workspace;
    private final long handle;
    private final Map<Shape, Long> plans = new HashMap<>();
    /** FP8 plans by shape: making one launches nothing, so a capture may make and keep it. */
    private final Map<Fp8Shape, Long> fp8Plans = new HashMap<>();
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
                throw new IllegalStateException("batch-invariant and FP8 × FP8 matmuls need cuBLASLt and none could "
                        + "be loaded: " + e.getMessage() + ". Put the folder holding libcublasLt.so.13 on LD_LIBRARY_PATH.", e);
            }
        }
        return library;
    }

    /**
     * Row-major {@code c[rows, cols] = a[rows, k] · b[cols, k]ᵀ}, as {@link Cublas#gemmRowsByWeightT}; a and b share
     * b's dtype.
     */
    void gemmRowsByWeightT(CudaTensor a, CudaTensor b, CudaTensor c, int rows, int cols, int k) {
        long plan = plan(new Shape(b.dtype(), c.dtype(), rows, cols, k), b);
        run(plan, a, b, c);
    }

    /**
     * Row-major {@code out[rows, cols] = Σ_k x[r, k] · w[c, k]} with x and w E4M3 codes, accumulated in fp32 into an
     * F32 {@code out}: cuBLASLt's bare FP8 product, whose scales the caller's epilogue applies. The mapping onto
     * cuBLASLt's column-major TN product is written down in cublas_shim.c.
     */
    void fp8GemmRowsByWeightT(CudaTensor x, CudaTensor w, CudaTensor out, int rows, int cols, int k) {
        if (out.dtype() != DType.F32) {
            throw new IllegalArgumentException("the FP8 GEMM writes fp32 sums, got " + out);
        }
        long plan = fp8Plan(rows, cols, k);
        if (plan == 0) {
            throw new IllegalStateException("cuBLASLt has no FP8 GEMM for " + rows + "x" + cols + "x" + k);
        }
        CublasNative.ltFp8Matmul(handle, plan, w.pointer(), x.pointer(), out.pointer(), workspace.pointer(),
                workspace.byteSize(), device.stream().handle());
    }

    /**
     * Whether cuBLASLt offers {@link #fp8GemmRowsByWeightT} for this shape: not on a GPU without FP8 tensor cores.
     * Asked once a shape.
     */
    boolean fp8GemmTakes(int rows, int cols, int k) {
        return fp8Plan(rows, cols, k) != 0;
    }

    /** The shape's FP8 plan, or 0 when cuBLASLt refused it (kept, so that it is asked once). */
    private long fp8Plan(int rows, int cols, int k) {
        return fp8Plans.computeIfAbsent(new Fp8Shape(rows, cols, k), s -> {
            try {
                return CublasNative.ltFp8Plan(handle, s.cols(), s.rows(), s.k(), workspace.byteSize());
            } catch (IllegalStateException refused) {
                return 0L;
            }
        });
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
        boolean capturing = capturing();
        if (s.rows() <= TUNED_ROWS && !capturing) {
            tuneBuckets(s, weight);
            cached = plans.get(s);
            if (cached != null) {
                return cached;
            }
        }
        long plan = newPlan(s);
        if (s.rows() > TUNED_ROWS) {
            plans.put(s, plan);
            return plan;
        }
        Long bucket = plans.get(s.withRows(Integer.highestOneBit(s.rows()) << 1));
        if (bucket != null && CublasNative.ltAdopt(handle, plan, bucket, workspace.byteSize())) {
            plans.put(s, plan);
            return plan;
        }
        if (capturing) {
            capturedPlans.add(plan);
            return plan;
        }
        tune(plan, s, weight);
        plans.put(s, plan);
        return plan;
    }

    /**
     * Times every power-of-two bucket of this weight's shape at once, the first time the shape is met outside a
     * capture (a prefill, which comes before any decode graph is captured), so the graphs' row counts find their
     * bucket tuned.
     */
    private void tuneBuckets(Shape s, CudaTensor weight) {
        for (int rows = 1; rows <= TUNED_ROWS; rows <<= 1) {
            Shape b = s.withRows(rows);
            if (!plans.containsKey(b)) {
                long plan = newPlan(b);
                tune(plan, b, weight);
                plans.put(b, plan);
            }
        }
    }

    private long newPlan(Shape s) {
        return CublasNative.ltPlan(handle, CudaMatmul.cudaType(s.operands()), CudaMatmul.cudaType(s.result()), s.cols(),
                s.rows(), s.k(), workspace.byteSize());
    }

    /** Times every candidate on scratch rows against the real weight and keeps the fastest. */
    private void tune(long plan, Shape s, CudaTensor weight) {
        int candidates = CublasNative.ltCandidates(plan);
        if (candidates == 1) {
            return;
        }
        CudaTensor a = device.scratch("lt.tune.a", s.operands(), (long) s.rows() * s.k());
        CudaTensor c = device.scratch("lt.tune.c", s.result(), (long) s.rows() * s.cols());
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
        fp8Plans.values().stream().filter(p -> p != 0).forEach(CublasNative::ltFp8PlanFree);
        fp8Plans.clear();
        plans.clear();
        capturedPlans.clear();
        CublasNative.ltDestroy(handle);
    }
}
