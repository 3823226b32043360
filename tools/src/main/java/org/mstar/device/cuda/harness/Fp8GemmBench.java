package org.mstar.device.cuda.harness;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import org.mstar.device.DType;
import org.mstar.device.Fp8Rows;
import org.mstar.device.Fp8Weight;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.CudaDevice;

/**
 * W8A8 GEMMs at prefill rows: the projections of a Llama-3.1-8B layer and its LM head (fp32 logits, as the engine
 * writes them) through CudaOps.matmul, three ways: bf16 weights (cuBLAS), an FP8 weight with one scale a row
 * multiplying FP8 rows (the FP8 GEMM alone, as when a norm or SiLU·mul hands it FP8 rows: cuBLASLt's plain FP8 product
 * into fp32, then the epilogue kernel applying the scales), and the same weight multiplying bf16 rows
 * (fp8_quantize_rows, then the GEMM). The FP8 dense rate is measured in the same run, on one square product of
 * {@value #SQUARE} (FP8 rows times a per-row-scaled weight), and each row is given as a fraction of it. Calls are timed
 * from a replayed CUDA graph; at these row counts the products are bound by their FLOPs, so one copy of each weight
 * serves (no rotation past L2).
 */
final class Fp8GemmBench {
    /** name, N, K: Llama-3.1-8B's projections and LM head. */
    static final Object[][] SHAPES = {
        {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336},
        {"lm_head", 128256, 4096},
    };
    static final int SQUARE = 8192;

    private final Twin tw;
    private final Random rnd;

    Fp8GemmBench(Twin twin, long seed) {
        this.tw = twin;
        this.rnd = new Random(seed);
    }

    record Row(String name, int m, int n, int k, double bf16Micros, double fp8Micros, double quantiseFp8Micros) {
        double tflops(double micros) {
            return 2.0 * m * n * k / (micros * 1e-6) / 1e12;
        }
    }

    /** The FP8 dense rate in TFLOP/s: one {@value #SQUARE}³ product of FP8 rows and an FP8 weight. */
    double squareTflops() {
        CudaDevice gpu = tw.gpu;
        try (Fp8Weight w = weight(SQUARE, SQUARE);
             Tensor x = AttentionBench.randomBf16(tw, SQUARE, SQUARE);
             Fp8Rows rows = Fp8Rows.allocate(gpu, SQUARE, SQUARE);
             Tensor out = gpu.allocate(DType.BF16, SQUARE, SQUARE)) {
            gpu.ops().quantizeRows(x, rows);
            double ms = Timing.graphedMillisPerCall(gpu, i -> gpu.ops().matmul(rows, w, null, out));
            return 2.0 * SQUARE * SQUARE * SQUARE / (ms * 1e-3) / 1e12;
        }
    }

    List<Row> run(int[] rowCounts) {
        CudaDevice gpu = tw.gpu;
        List<Row> rows = new ArrayList<>();
        for (Object[] s : SHAPES) {
            String name = (String) s[0];
            int n = (int) s[1];
            int k = (int) s[2];
            DType outType = name.equals("lm_head") ? DType.F32 : DType.BF16;
            try (Tensor dense = AttentionBench.randomBf16(tw, n, k); Fp8Weight w = weight(n, k)) {
                for (int m : rowCounts) {
                    try (Tensor x = AttentionBench.randomBf16(tw, m, k);
                         Fp8Rows q = Fp8Rows.allocate(gpu, m, k);
                         Tensor out = gpu.allocate(outType, m, n)) {
                        gpu.ops().quantizeRows(x, q);
                        double bf16 = Timing.graphedMillisPerCall(gpu, i -> gpu.ops().matmul(x, dense, null, out));
                        double fp8 = Timing.graphedMillisPerCall(gpu, i -> gpu.ops().matmul(q, w, null, out));
                        double quantised = Timing.graphedMillisPerCall(gpu, i -> gpu.ops().matmul(x, w, null, out));
                        rows.add(new Row(name, m, n, k, bf16 * 1e3, fp8 * 1e3, quantised * 1e3));
                    }
                }
            }
        }
        return rows;
    }

    /** A W8A8 weight {@code [n, k]} of random finite codes and one random scale a row. */
    private Fp8Weight weight(int n, int k) {
        CudaDevice gpu = tw.gpu;
        Fp8Weight w = Fp8Weight.allocate(gpu, n, k, 1, k);
        int tile = (int) Math.min((long) n * k, 64L << 20);
        byte[] codes = new byte[tile];
        rnd.nextBytes(codes);
        for (int i = 0; i < tile; i++) {
            if ((codes[i] & 0x7F) == 0x7F) {
                codes[i] = 0; // the NaN codes
            }
        }
        ByteBuffer buf = ByteBuffer.allocateDirect(tile).put(codes);
        Tensor flat = w.codes().reshape((long) n * k);
        for (long off = 0; off < (long) n * k; off += tile) {
            long len = Math.min(tile, (long) n * k - off);
            gpu.copyFromHost(buf.clear().limit((int) len), flat.rows(off, len));
        }
        ByteBuffer scales = ByteBuffer.allocateDirect(4 * n).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < n; i++) {
            scales.putFloat(1e-3f * (1 + rnd.nextFloat()));
        }
        gpu.copyFromHost(scales.flip(), w.scales());
        return w.quantisingActivations();
    }

    static String table(List<Row> rows, double squareTflops) {
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT,
                "FP8 dense rate measured in this run: %.0f TFLOP/s (%d³, FP8 rows × FP8 weight, bf16 out)%n%n",
                squareTflops, SQUARE, SQUARE));
        sb.append("| proj | M | N | K | bf16 µs | bf16 TFLOP/s | FP8 µs | FP8 TFLOP/s | of FP8 rate | quantise+FP8 µs "
                + "| bf16 / FP8 time |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "| %s | %d | %d | %d | %.1f | %.0f | %.1f | %.0f | %.0f%% | %.1f | %.2f |%n",
                    r.name, r.m, r.n, r.k, r.bf16Micros, r.tflops(r.bf16Micros), r.fp8Micros, r.tflops(r.fp8Micros),
                    100 * r.tflops(r.fp8Micros) / squareTflops, r.quantiseFp8Micros, r.bf16Micros / r.fp8Micros));
        }
        return sb.toString();
    }
}
