package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.mstar.device.DType;
import org.mstar.device.KernelOptions;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.CudaDevice;

/**
 * bf16 projections through CudaOps.matmul (cuBLAS): the GEMM shapes of one Llama-3-8B layer at several
 * token counts, and whether a row's result is bit-identical at every batch size (batch invariance).
 * Weights rotate over enough copies to exceed the L2 cache, so small products read HBM as in a model;
 * calls are timed from a replayed CUDA graph, so small products are not hidden behind launch latency.
 */
final class GemmBench {
    /** name, N (outputs), K (inputs) of the projections of a Llama-3-8B layer. */
    static final Object[][] LLAMA3_8B = {
        {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336},
    };
    /**
     * name, N, K of the decode projections the skinny-matmul kernel is compared on: the layers and LM heads of
     * Llama-3-8B and Llama-3.2-1B (the LM heads write fp32 logits, as the engine's do).
     */
    static final Object[][] DECODE_SHAPES = {
        {"8B qkv", 6144, 4096}, {"8B o", 4096, 4096}, {"8B gate_up", 28672, 4096}, {"8B down", 4096, 14336},
        {"8B lm_head", 128256, 4096}, {"1B qkv", 3072, 2048}, {"1B o", 2048, 2048}, {"1B gate_up", 16384, 2048},
        {"1B down", 2048, 8192}, {"1B lm_head", 128256, 2048},
    };
    private static final long ROTATION_BYTES = 256L << 20;

    private final Twin tw;

    GemmBench(Twin twin) {
        this.tw = twin;
    }

    record Row(String name, int m, int n, int k, double micros, double tflops, double weightTbPerS) {}

    List<Row> run(int[] tokenCounts) {
        List<Row> rows = new ArrayList<>();
        for (Object[] s : LLAMA3_8B) {
            for (int m : tokenCounts) {
                rows.add(measure((String) s[0], m, (int) s[1], (int) s[2]));
            }
        }
        rows.add(measure("square", 8192, 8192, 8192));
        return rows;
    }

    /** One GEMM [m, k] x [n, k]ᵀ, graph-replayed over weight copies that rotate past L2. */
    Row measure(String name, int m, int n, int k) {
        CudaDevice gpu = tw.gpu;
        long weightBytes = 2L * n * k;
        int copies = (int) Math.max(1, Math.min(8, (ROTATION_BYTES + weightBytes - 1) / weightBytes));
        List<Tensor> weights = new ArrayList<>();
        for (int i = 0; i < copies; i++) {
            weights.add(AttentionBench.randomBf16(tw, n, k));
        }
        try (Tensor x = AttentionBench.randomBf16(tw, m, k);
             Tensor out = gpu.allocate(DType.BF16, m, n)) {
            double ms = Timing.graphedMillisPerCall(gpu, i -> gpu.ops().matmul(x, weights.get(i % copies), null, out));
            double flops = 2.0 * m * n * k;
            return new Row(name, m, n, k, ms * 1e3, flops / (ms * 1e-3) / 1e12, weightBytes / (ms * 1e-3) / 1e12);
        } finally {
            weights.forEach(Tensor::close);
        }
    }

    /**
     * One decode projection at {@code m} rows through cuBLAS and through the skinny-matmul kernel, and how far
     * apart their outputs are (‖skinny − cuBLAS‖ / ‖cuBLAS‖; both accumulate in fp32).
     */
    record SkinnyRow(String name, int m, int n, int k, double cublasMicros, double skinnyMicros, double relDiff) {
        double weightTbPerS(double micros) {
            return 2.0 * n * k / (micros * 1e-6) / 1e12;
        }
    }

    List<SkinnyRow> skinny(int[] rowCounts) {
        CudaDevice gpu = tw.gpu;
        CudaDevice cublasOnly = gpu.withOptions(gpu.options().withSkinnyMatmulRows(0));
        CudaDevice skinny = gpu.withOptions(gpu.options().withSkinnyMatmulRows(KernelOptions.MAX_SKINNY_MATMUL_ROWS));
        int maxM = rowCounts[rowCounts.length - 1];
        List<SkinnyRow> rows = new ArrayList<>();
        for (Object[] s : DECODE_SHAPES) {
            String name = (String) s[0];
            int n = (int) s[1];
            int k = (int) s[2];
            DType outType = name.endsWith("lm_head") ? DType.F32 : DType.BF16;
            long weightBytes = 2L * n * k;
            int copies = (int) Math.max(1, Math.min(8, (ROTATION_BYTES + weightBytes - 1) / weightBytes));
            List<Tensor> weights = new ArrayList<>();
            for (int i = 0; i < copies; i++) {
                weights.add(AttentionBench.randomBf16(tw, n, k));
            }
            try (Tensor x = AttentionBench.randomBf16(tw, maxM, k);
                 Tensor viaCublas = gpu.allocate(outType, maxM, n);
                 Tensor viaSkinny = gpu.allocate(outType, maxM, n)) {
                for (int m : rowCounts) {
                    Tensor xm = x.rows(0, m);
                    Tensor a = viaCublas.rows(0, m);
                    Tensor b = viaSkinny.rows(0, m);
                    double cublasMs = Timing.graphedMillisPerCall(cublasOnly,
                            i -> cublasOnly.ops().matmul(xm, weights.get(i % copies), null, a));
                    double skinnyMs = Timing.graphedMillisPerCall(skinny,
                            i -> skinny.ops().matmul(xm, weights.get(i % copies), null, b));
                    rows.add(new SkinnyRow(name, m, n, k, cublasMs * 1e3, skinnyMs * 1e3,
                            Twin.relErr(gpu.toFloats(a), gpu.toFloats(b))));
                }
            } finally {
                weights.forEach(Tensor::close);
            }
        }
        return rows;
    }

    static String skinnyTable(List<SkinnyRow> rows, double copyTbPerS) {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "| proj | M | N | K | cuBLAS µs | cuBLAS TB/s | skinny µs | skinny TB/s "
                + "| skinny of %.2f TB/s | cuBLAS / skinny time | rel. diff |%n", copyTbPerS));
        sb.append("|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (SkinnyRow r : rows) {
            sb.append(String.format(Locale.ROOT, "| %s | %d | %d | %d | %.1f | %.2f | %.1f | %.2f | %.0f%% | %.2f | %.1e |%n",
                    r.name, r.m, r.n, r.k, r.cublasMicros, r.weightTbPerS(r.cublasMicros), r.skinnyMicros,
                    r.weightTbPerS(r.skinnyMicros), 100 * r.weightTbPerS(r.skinnyMicros) / copyTbPerS,
                    r.cublasMicros / r.skinnyMicros, r.relDiff));
        }
        return sb.toString();
    }

    static String table(List<Row> rows) {
        StringBuilder sb = new StringBuilder();
        sb.append("| proj | M (tokens) | N | K | µs | TFLOP/s | weight TB/s |\n|---|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "| %s | %d | %d | %d | %.1f | %.1f | %.2f |%n", r.name, r.m, r.n, r.k,
                    r.micros, r.tflops, r.weightTbPerS));
        }
        return sb.toString();
    }

    /** For each batch size M: how many of the first rows equal, bit for bit, the same rows computed at M = 1. */
    record Invariance(String name, int m, int rowsChecked, int rowsIdentical, double maxAbsDiff, double micros) {}

    List<Invariance> batchInvariance(int[] batchSizes) {
        List<Invariance> out = new ArrayList<>();
        CudaDevice gpu = tw.gpu;
        for (Object[] s : new Object[][] {LLAMA3_8B[0], LLAMA3_8B[2]}) {
            int n = (int) s[1];
            int k = (int) s[2];
            int maxM = batchSizes[batchSizes.length - 1];
            int checked = Math.min(4, maxM);
            try (Tensor w = AttentionBench.randomBf16(tw, n, k);
                 Tensor x = AttentionBench.randomBf16(tw, maxM, k);
                 Tensor one = gpu.allocate(DType.BF16, 1, n)) {
                float[][] alone = new float[checked][];
                for (int r = 0; r < checked; r++) {
                    gpu.ops().matmul(x.rows(r, 1), w, null, one);
                    alone[r] = gpu.toFloats(one);
                }
                for (int m : batchSizes) {
                    try (Tensor o = gpu.allocate(DType.BF16, m, n)) {
                        Tensor xm = x.rows(0, m);
                        double ms = Timing.graphedMillisPerCall(gpu, i -> gpu.ops().matmul(xm, w, null, o));
                        float[] got = gpu.toFloats(o);
                        int rows = Math.min(checked, m);
                        int same = 0;
                        double maxDiff = 0;
                        for (int r = 0; r < rows; r++) {
                            boolean identical = true;
                            for (int j = 0; j < n; j++) {
                                float a = got[r * n + j];
                                float b = alone[r][j];
                                if (Float.floatToRawIntBits(a) != Float.floatToRawIntBits(b)) {
                                    identical = false;
                                    maxDiff = Math.max(maxDiff, Math.abs((double) a - b));
                                }
                            }
                            same += identical ? 1 : 0;
                        }
                        out.add(new Invariance((String) s[0], m, rows, same, maxDiff, ms * 1e3));
                    }
                }
            }
        }
        return out;
    }

    static String invarianceTable(List<Invariance> rows) {
        StringBuilder sb = new StringBuilder();
        sb.append("| proj | M | rows checked | bit-identical to M=1 | max abs diff | µs at M |\n|---|---|---|---|---|---|\n");
        for (Invariance r : rows) {
            sb.append(String.format(Locale.ROOT, "| %s | %d | %d | %d | %.3g | %.1f |%n", r.name, r.m, r.rowsChecked,
                    r.rowsIdentical, r.maxAbsDiff, r.micros));
        }
        return sb.toString();
    }
}
