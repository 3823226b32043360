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
import org.mstar.device.Fp8Weight;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.harness.Twin.Pair;
import org.mstar.model.Fp8Quantization;
import org.mstar.model.Fp8Quantizer;

/**
 * The GPU's products with FP8 weights ({@link Fp8Weight}) against the CPU reference, which dequantises each code
 * times its scale in fp32: Llama-3-8B's projections (qkv 6144 × 4096 in 128 × 128 blocks, gate/up 28672 × 4096 with
 * one scale a row, down 4096 × 14336 with one scale) at decode rows (1, 64: the skinny kernel) and prefill rows (512,
 * 2048: the weight dequantised into bf16 for cuBLAS), bf16 activations and outputs; and the gate/up projection with
 * its activation, which FP8 weights route around the fused skinny epilogue. Each row also gives the weight bytes the
 * product read per millisecond (codes and scales once).
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
        for (int rows : new int[] {1, 64, 512, 2048}) {
            attempt("fp8 matmul qkv, 128x128 blocks", () -> matmul(rows, QKV, HIDDEN, blocks, false));
        }
        for (int rows : new int[] {1, 64, 512}) {
            attempt("fp8 matmul gate/up, channels", () -> matmul(rows, 2 * INTER, HIDDEN, channels, false));
            attempt("fp8 matmul down, tensor", () -> matmul(rows, HIDDEN, INTER, tensor, false));
        }
        attempt("fp8 matmul+bias, channels", () -> matmul(7, 1000, 576, channels, true));
        for (int rows : new int[] {1, 64}) {
            attempt("fp8 gateUpActivation", () -> gateUpActivation(rows, 1024, HIDDEN));
        }
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
                    + layout.layout().name().toLowerCase(Locale.ROOT) + ", " + weightRate(w[1], ms), "BF16", err,
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
