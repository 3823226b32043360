package org.mstar.device.cuda.harness;

import static org.mstar.device.cuda.harness.Twin.relErr;
import static org.mstar.device.cuda.harness.Twin.shape;
import static org.mstar.device.cuda.harness.Twin.tolerance;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Float8E4m3;
import org.mstar.device.Fp8Rows;
import org.mstar.device.Fp8Weight;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.harness.Twin.Pair;
import org.mstar.model.Fp8Quantization;
import org.mstar.model.Fp8Quantizer;

/**
 * The GPU's products with FP8 weights ({@link Fp8Weight}) against the CPU reference, which dequantises each code
 * times its scale in fp32: Llama-3-8B's projections (qkv 6144 × 4096 in 128 × 128 blocks, gate/up 28672 × 4096 with
 * one scale a row, down 4096 × 14336 with one scale) at decode rows (1, 9 and 16: the skinny kernel, with two weight
 * tiles a block for gate/up; 17, 23, 32, 33, 48, 57 and 64: the tile kernel, its two instantiations and odd counts)
 * and prefill rows (512, 2048: the weight dequantised into bf16 for cuBLAS), bf16 activations and outputs; and the
 * gate/up projection with its activation, which FP8 weights route around the fused skinny epilogue. Each row also
 * gives the weight bytes the product read per millisecond (codes and scales once).
 *
 * <p>W8A8 ({@link Fp8Weight#quantisesActivations()}), against the CPU's definition ({@link Fp8Rows#quantise}: a
 * scale a row, amax / 448): rows quantised alone (codes and scales must equal the CPU's bit for bit), by RMSNorm
 * (with the residual add) and by SiLU·mul (their dequantised rows within 2e-2 of the CPU's: a block reduction may
 * move a code one step where a value lies on a rounding boundary); and the products: at 1, 33 and 64 rows the input's
 * rows dequantised to bf16 into the skinny or the tile kernel, above 64 the FP8 × FP8 cuBLASLt GEMM into fp32 with
 * the scales in our epilogue (per-channel and per-tensor weights, bf16 out, fp32 out for the LM head, a bias, the input
 * given as FP8 rows), and a 128 × 128 block-scaled weight on its bf16 fallback.
 */
final class Fp8Checks {
    private static final int QKV = 6144;
    private static final int HIDDEN = 4096;
    private static final int INTER = 14336;

    private final Twin tw;
    private final List<CheckResult> results = new ArrayList<>();

    Fp8Checks(Twin twin) {
        this.tw = twin;
    }

    List<CheckResult> run() {
        Fp8Quantization blocks = Fp8Quantization.blocks(128, 128, List.of());
        Fp8Quantization channels = Fp8Quantization.channels(List.of());
        Fp8Quantization tensor = Fp8Quantization.perTensor(List.of());
        for (int rows : new int[] {1, 16, 17, 23, 32, 33, 48, 57, 64, 512, 2048}) {
            attempt("fp8 matmul qkv, 128x128 blocks", () -> matmul(rows, QKV, HIDDEN, blocks, false));
        }
        for (int rows : new int[] {1, 9, 17, 48, 64, 512}) {
            attempt("fp8 matmul gate/up, channels", () -> matmul(rows, 2 * INTER, HIDDEN, channels, false));
            attempt("fp8 matmul down, tensor", () -> matmul(rows, HIDDEN, INTER, tensor, false));
        }
        attempt("fp8 matmul+bias, channels", () -> matmul(7, 1000, 576, channels, true));
        attempt("fp8 matmul+bias, channels", () -> matmul(41, 1000, 576, channels, true));
        for (int rows : new int[] {1, 64}) {
            attempt("fp8 gateUpActivation", () -> gateUpActivation(rows, 1024, HIDDEN));
        }
        for (int rows : new int[] {1, 300}) {
            attempt("fp8 quantizeRows", () -> quantizeRows(rows, HIDDEN));
            attempt("fp8 rmsNorm into FP8 rows", () -> rmsNormRows(rows, HIDDEN));
            attempt("fp8 siluMul into FP8 rows", () -> siluMulRows(rows, INTER));
        }
        for (int rows : new int[] {1, 33, 64, 128, 2048}) {
            attempt("w8a8 matmul qkv, channels", () -> w8a8(rows, QKV, HIDDEN, channels, DType.BF16, false, false));
        }
        for (int rows : new int[] {1, 64, 512}) {
            attempt("w8a8 matmul down, tensor", () -> w8a8(rows, HIDDEN, INTER, tensor, DType.BF16, false, false));
        }
        attempt("w8a8 matmul gate/up, channels, FP8 rows in",
                () -> w8a8(512, 2 * INTER, HIDDEN, channels, DType.BF16, false, true));
        attempt("w8a8 matmul qkv, 128x128 blocks (bf16 fallback)",
                () -> w8a8(512, QKV, HIDDEN, blocks, DType.BF16, false, false));
        attempt("w8a8 matmul+bias, channels", () -> w8a8(100, 1024, 576, channels, DType.BF16, true, false));
        attempt("w8a8 matmul+bias, channels, FP8 rows in",
                () -> w8a8(100, 1024, 576, channels, DType.BF16, true, true));
        // an LM head's fp32 logits (a vocabulary of 32768 keeps the host's reference small)
        attempt("w8a8 matmul lm_head, channels, fp32 out",
                () -> w8a8(128, 32768, HIDDEN, channels, DType.F32, false, false));
        return results;
    }

    private void attempt(String name, Runnable check) {
        CheckResult.attempt(results, name, check);
    }

    /** A random {@code [n, k]} weight quantised in {@code layout}, the same codes and scales on both devices. */
    private Fp8Weight[] weight(int n, int k, Fp8Quantization layout) {
        float[] w = tw.randomFloats(n * k, 0.1f, DType.F32);
        Fp8Quantizer.Quantised q = Fp8Quantizer.quantise(w, n, k, layout);
        int blockRows = switch (layout.layout()) {
            case BLOCK -> layout.blockRows();
            case CHANNEL -> 1;
            case TENSOR -> n;
        };
        int blockCols = layout.layout() == Fp8Quantization.Layout.BLOCK ? layout.blockCols() : k;
        return new Fp8Weight[] {upload(tw.cpu, q, n, k, blockRows, blockCols),
            upload(tw.gpu, q, n, k, blockRows, blockCols)};
    }

    private static Fp8Weight upload(Device device, Fp8Quantizer.Quantised q, int n, int k, int blockRows,
                                    int blockCols) {
        Fp8Weight w = Fp8Weight.allocate(device, n, k, blockRows, blockCols);
        device.copyFromHost(ByteBuffer.allocateDirect(q.codes().length).put(q.codes()).flip(), w.codes());
        ByteBuffer scales = ByteBuffer.allocateDirect(q.scales().length * 4).order(ByteOrder.LITTLE_ENDIAN);
        scales.asFloatBuffer().put(q.scales());
        device.copyFromHost(scales, w.scales());
        return w;
    }

    private void matmul(int rows, int n, int k, Fp8Quantization layout, boolean bias) {
        Fp8Weight[] w = weight(n, k, layout);
        Pair x = tw.floats(tw.randomFloats(rows * k, 1f, DType.BF16), DType.BF16, rows, k);
        Pair b = bias ? tw.floats(tw.randomFloats(n, 1f, DType.F32), DType.F32, n) : null;
        Pair out = tw.poisoned(DType.BF16, rows, n);
        try {
            tw.cpu.ops().matmul(x.cpu(), w[0], b == null ? null : b.cpu(), out.cpu());
            Runnable gpuOp = () -> tw.gpu.ops().matmul(x.gpu(), w[1], b == null ? null : b.gpu(), out.gpu());
            gpuOp.run();
            double err = relErr(tw.cpu.toFloats(out.cpu()), tw.gpu.toFloats(out.gpu()));
            double ms = tw.median(gpuOp);
            results.add(new CheckResult("fp8 matmul" + (bias ? "+bias" : ""), shape(rows, k) + "·" + shape(n, k) + "ᵀ "
                    + layout.layout().name().toLowerCase(Locale.ROOT) + ", " + weightOnlyPath(rows) + ", "
                    + weightRate(w[1], ms), "BF16", err,
                    tolerance(DType.BF16), ms, "cpu, dequantised fp32"));
        } finally {
            w[1].close();
            close(x, b, out);
        }
    }

    private void gateUpActivation(int rows, int inter, int k) {
        Fp8Weight[] w = weight(2 * inter, k, Fp8Quantization.channels(List.of()));
        Pair x = tw.floats(tw.randomFloats(rows * k, 1f, DType.BF16), DType.BF16, rows, k);
        Pair gateUp = tw.poisoned(DType.BF16, rows, 2 * inter);
        Pair out = tw.poisoned(DType.BF16, rows, inter);
        try {
            tw.cpu.ops().gateUpActivation(x.cpu(), w[0], false, gateUp.cpu(), out.cpu());
            Runnable gpuOp = () -> tw.gpu.ops().gateUpActivation(x.gpu(), w[1], false, gateUp.gpu(), out.gpu());
            gpuOp.run();
            double err = relErr(tw.cpu.toFloats(out.cpu()), tw.gpu.toFloats(out.gpu()));
            results.add(new CheckResult("fp8 gateUpActivation silu", shape(rows, k) + "·" + shape(2L * inter, k) + "ᵀ",
                    "BF16", err, tolerance(DType.BF16), tw.median(gpuOp), "cpu, dequantised fp32"));
        } finally {
            w[1].close();
            close(x, gateUp, out);
        }
    }

    private void quantizeRows(int rows, int k) {
        Pair x = tw.floats(tw.randomFloats(rows * k, 3f, DType.BF16), DType.BF16, rows, k);
        Fp8Rows[] q = {Fp8Rows.allocate(tw.cpu, rows, k), Fp8Rows.allocate(tw.gpu, rows, k)};
        try {
            tw.cpu.ops().quantizeRows(x.cpu(), q[0]);
            Runnable gpuOp = () -> tw.gpu.ops().quantizeRows(x.gpu(), q[1]);
            gpuOp.run();
            // the definition is exact on both devices: the count of codes and scales that differ
            byte[] cpuCodes = bytes(tw.cpu, q[0].codes());
            byte[] gpuCodes = bytes(tw.gpu, q[1].codes());
            float[] cpuScales = tw.cpu.toFloats(q[0].scales());
            float[] gpuScales = tw.gpu.toFloats(q[1].scales());
            int differ = 0;
            for (int i = 0; i < cpuCodes.length; i++) {
                differ += cpuCodes[i] != gpuCodes[i] ? 1 : 0;
            }
            for (int r = 0; r < rows; r++) {
                differ += Float.floatToRawIntBits(cpuScales[r]) != Float.floatToRawIntBits(gpuScales[r]) ? 1 : 0;
            }
            results.add(new CheckResult("fp8 quantizeRows", shape(rows, k) + " bf16, codes+scales differing", "U8",
                    differ, 0, tw.median(gpuOp), "cpu, Fp8Rows.quantise"));
        } finally {
            q[1].close();
            close(x);
        }
    }

    private void rmsNormRows(int rows, int hidden) {
        Pair x = tw.floats(tw.randomFloats(rows * hidden, 2f, DType.BF16), DType.BF16, rows, hidden);
        Pair residual = tw.floats(tw.randomFloats(rows * hidden, 1f, DType.F32), DType.F32, rows, hidden);
        Pair w = tw.floats(tw.randomFloats(hidden, 1f, DType.BF16), DType.BF16, hidden);
        Fp8Rows[] q = {Fp8Rows.allocate(tw.cpu, rows, hidden), Fp8Rows.allocate(tw.gpu, rows, hidden)};
        try {
            tw.cpu.ops().rmsNorm(x.cpu(), residual.cpu(), w.cpu(), 1e-5f, q[0]);
            tw.gpu.ops().rmsNorm(x.gpu(), residual.gpu(), w.gpu(), 1e-5f, q[1]);
            double err = Math.max(relErr(values(tw.cpu, q[0]), values(tw.gpu, q[1])),
                    relErr(tw.cpu.toFloats(residual.cpu()), tw.gpu.toFloats(residual.gpu())));
            // timed without the residual: the add would change it on every call
            double ms = tw.median(() -> tw.gpu.ops().rmsNorm(x.gpu(), null, w.gpu(), 1e-5f, q[1]));
            results.add(new CheckResult("fp8 rmsNorm+residual → FP8 rows", shape(rows, hidden), "U8", err, 2e-2, ms,
                    "cpu, fp32 norm quantised"));
        } finally {
            q[1].close();
            close(x, residual, w);
        }
    }

    private void siluMulRows(int rows, int inter) {
        Pair gateUp = tw.floats(tw.randomFloats(rows * 2 * inter, 4f, DType.BF16), DType.BF16, rows, 2L * inter);
        Fp8Rows[] q = {Fp8Rows.allocate(tw.cpu, rows, inter), Fp8Rows.allocate(tw.gpu, rows, inter)};
        try {
            tw.cpu.ops().siluMul(gateUp.cpu(), q[0]);
            Runnable gpuOp = () -> tw.gpu.ops().siluMul(gateUp.gpu(), q[1]);
            gpuOp.run();
            results.add(new CheckResult("fp8 siluMul → FP8 rows", shape(rows, inter), "U8",
                    relErr(values(tw.cpu, q[0]), values(tw.gpu, q[1])), 2e-2, tw.median(gpuOp),
                    "cpu, fp32 silu·mul quantised"));
        } finally {
            q[1].close();
            close(gateUp);
        }
    }

    /**
     * A W8A8 product against the CPU's (input rows quantised, both dequantised, fp32 sums), the input bf16 or (with
     * {@code rowsIn}) given as FP8 rows quantised on each device.
     */
    private void w8a8(int rows, int n, int k, Fp8Quantization layout, DType outType, boolean bias, boolean rowsIn) {
        Fp8Weight[] w = weight(n, k, layout);
        Fp8Weight cpuW = w[0].quantisingActivations();
        Fp8Weight gpuW = w[1].quantisingActivations();
        Pair x = tw.floats(tw.randomFloats(rows * k, 1f, DType.BF16), DType.BF16, rows, k);
        Pair b = bias ? tw.floats(tw.randomFloats(n, 1f, DType.F32), DType.F32, n) : null;
        Pair out = tw.poisoned(outType, rows, n);
        Fp8Rows[] q = rowsIn ? new Fp8Rows[] {Fp8Rows.allocate(tw.cpu, rows, k), Fp8Rows.allocate(tw.gpu, rows, k)}
                : null;
        try {
            if (rowsIn) {
                tw.cpu.ops().quantizeRows(x.cpu(), q[0]);
                tw.gpu.ops().quantizeRows(x.gpu(), q[1]);
            }
            Tensor cpuX = rowsIn ? q[0] : x.cpu();
            Tensor gpuX = rowsIn ? q[1] : x.gpu();
            tw.cpu.ops().matmul(cpuX, cpuW, b == null ? null : b.cpu(), out.cpu());
            Runnable gpuOp = () -> tw.gpu.ops().matmul(gpuX, gpuW, b == null ? null : b.gpu(), out.gpu());
            gpuOp.run();
            double err = relErr(tw.cpu.toFloats(out.cpu()), tw.gpu.toFloats(out.gpu()));
            double ms = tw.median(gpuOp);
            String path = rows <= 64 ? "bf16 rows, " + weightOnlyPath(rows) : layout.layout() == Fp8Quantization.Layout.BLOCK
                    ? "bf16 fallback" : "FP8 GEMM, scales in epilogue";
            results.add(new CheckResult("w8a8 matmul" + (bias ? "+bias" : ""), shape(rows, k) + "·" + shape(n, k)
                    + "ᵀ " + layout.layout().name().toLowerCase(Locale.ROOT) + (rowsIn ? ", FP8 rows in" : "") + ", "
                    + path + ", " + tflops(rows, n, k, ms), outType.name(), err,
                    outType == DType.F32 ? 1e-3 : tolerance(DType.BF16), ms,
                    "cpu, rows quantised, fp32"));
        } finally {
            gpuW.close();
            if (q != null) {
                q[1].close();
            }
            close(x, b, out);
        }
    }

    private static byte[] bytes(Device device, Tensor u8) {
        ByteBuffer buf = ByteBuffer.allocateDirect(Math.toIntExact(u8.byteSize()));
        device.copyToHost(u8, buf);
        byte[] out = new byte[buf.capacity()];
        buf.rewind().get(out);
        return out;
    }

    /** The values FP8 rows stand for, code × row scale. */
    private static float[] values(Device device, Fp8Rows q) {
        byte[] codes = bytes(device, q.codes());
        float[] scales = device.toFloats(q.scales());
        int k = Math.toIntExact(q.dim(1));
        float[] v = new float[codes.length];
        for (int i = 0; i < v.length; i++) {
            v[i] = Float8E4m3.decode(codes[i]) * scales[i / k];
        }
        return v;
    }

    /** The kernel CudaFp8Matmul multiplies bf16 rows with: the skinny one, the tile one, or the bf16 scratch. */
    private static String weightOnlyPath(int rows) {
        return rows <= 16 ? "skinny" : rows <= 64 ? "tile" : "bf16 scratch";
    }

    private static String tflops(int m, int n, int k, double millis) {
        return String.format(Locale.ROOT, "%.0f TFLOP/s", 2.0 * m * n * k / (millis * 1e9));
    }

    private static String weightRate(Tensor w, double millis) {
        return String.format(Locale.ROOT, "%.2f TB/s of weight", w.byteSize() / (millis * 1e9));
    }

    private static void close(Pair... pairs) {
        for (Pair p : pairs) {
            if (p != null) {
                p.gpu().close();
            }
        }
    }
}
