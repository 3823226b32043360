package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.IntConsumer;
import org.mstar.device.DType;
import org.mstar.device.RopeParams;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.CudaDevice;

/**
 * The fused decode projections of one Llama-3.2-1B layer (qkv + split + RoPE + KV append, gate/up + SiLU·mul)
 * with the GEMV kernels on, against the same op with them off (cuBLAS, then the separate kernel), at a few rows.
 * Timed as {@link GemmBench} times: weights rotate over enough copies to exceed the L2 cache, and ten calls are
 * replayed from one CUDA graph, so the launch gap the fusion removes is counted as a decode graph pays it.
 */
final class FusionBench {
    private static final int HIDDEN = 2048;
    private static final int INTER = 8192;
    private static final int Q_HEADS = 32;
    private static final int KV_HEADS = 8;
    private static final int HEAD_DIM = 64;
    private static final int PAGE = 16;
    private static final long ROTATION_BYTES = 256L << 20;

    private final Twin tw;

    FusionBench(Twin twin) {
        this.tw = twin;
    }

    /** One op at m rows: microseconds per call with the GEMV and without, and the weight bytes it streams. */
    record Row(String op, int m, double gemvMicros, double unfusedMicros, long weightBytes) {}

    List<Row> run(int[] rowCounts) {
        List<Row> rows = new ArrayList<>();
        for (int m : rowCounts) {
            rows.add(gateUp(m));
            rows.add(qkv(m));
        }
        return rows;
    }

    private Row gateUp(int m) {
        List<Tensor> weights = rotatingWeights(2 * INTER, HIDDEN);
        try (Tensor x = AttentionBench.randomBf16(tw, m, HIDDEN);
             Tensor gateUp = tw.gpu.allocate(DType.BF16, m, 2 * INTER);
             Tensor out = tw.gpu.allocate(DType.BF16, m, INTER)) {
            return both("gateUpActivation (SiLU)", m, weights, i -> tw.gpu.ops().gateUpActivation(x,
                    weights.get(i % weights.size()), false, gateUp, out));
        } finally {
            weights.forEach(Tensor::close);
        }
    }

    private Row qkv(int m) {
        int width = (Q_HEADS + 2 * KV_HEADS) * HEAD_DIM;
        RopeParams rope = new RopeParams(HEAD_DIM, false, 500000.0, 32.0, true, 1.0, 4.0, 8192.0);
        int pages = (m + PAGE - 1) / PAGE;
        int[] pos = new int[m];
        int[] pageIdx = new int[m];
        int[] offsets = new int[m];
        for (int i = 0; i < m; i++) {
            pos[i] = 500 + i;
            pageIdx[i] = i / PAGE;
            offsets[i] = i % PAGE;
        }
        List<Tensor> weights = rotatingWeights(width, HIDDEN);
        try (Tensor x = AttentionBench.randomBf16(tw, m, HIDDEN);
             Tensor qkv = tw.gpu.allocate(DType.BF16, m, width);
             Tensor q = tw.gpu.allocate(DType.BF16, m, Q_HEADS, HEAD_DIM);
             Tensor pool = tw.gpu.allocate(DType.BF16, 1, pages, 2, PAGE, KV_HEADS, HEAD_DIM);
             Tensor posT = tw.gpu.fromInts(pos, m);
             Tensor pageT = tw.gpu.fromInts(pageIdx, m);
             Tensor offT = tw.gpu.fromInts(offsets, m)) {
            return both("qkvProjectionRopeAppend", m, weights, i -> tw.gpu.ops().qkvProjectionRopeAppend(x,
                    weights.get(i % weights.size()), null, qkv, posT, rope, pool, 0, pageT, offT, q));
        } finally {
            weights.forEach(Tensor::close);
        }
    }

    private Row both(String op, int m, List<Tensor> weights, IntConsumer call) {
        CudaDevice gpu = tw.gpu;
        try {
            gpu.setFusedGemv(true);
            double gemv = Timing.graphedMillisPerCall(gpu, call);
            gpu.setFusedGemv(false);
            double unfused = Timing.graphedMillisPerCall(gpu, call);
            return new Row(op, m, gemv * 1e3, unfused * 1e3, weights.get(0).byteSize());
        } finally {
            gpu.setFusedGemv(false); // the default
        }
    }

    private List<Tensor> rotatingWeights(int n, int k) {
        long bytes = 2L * n * k;
        int copies = (int) Math.max(1, Math.min(8, (ROTATION_BYTES + bytes - 1) / bytes));
        List<Tensor> weights = new ArrayList<>();
        for (int i = 0; i < copies; i++) {
            weights.add(AttentionBench.randomBf16(tw, n, k));
        }
        return weights;
    }

    static String table(List<Row> rows) {
        StringBuilder sb = new StringBuilder("| op | rows | GEMV µs | cuBLAS + kernel µs | GEMV / unfused speed "
                + "| GEMV weight TB/s | unfused weight TB/s |\n|---|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "| %s | %d | %.1f | %.1f | %.2f | %.2f | %.2f |%n", r.op, r.m,
                    r.gemvMicros, r.unfusedMicros, r.unfusedMicros / r.gemvMicros, r.weightBytes / r.gemvMicros / 1e6,
                    r.weightBytes / r.unfusedMicros / 1e6));
        }
        return sb.toString();
    }
}
