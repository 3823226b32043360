package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.nio.ByteBuffer;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.mstar.device.DType;
import org.mstar.device.Float8E4m3;
import org.mstar.device.Fp8Rows;
import org.mstar.device.Fp8Weight;
import org.mstar.device.Tensor;

/**
 * The CPU's W8A8 ops against their definition: the norm and the activation writing FP8 rows equal their fp32 result
 * quantised by quantizeRows, and a product with a W8A8 weight is the fp32 sum, in order of k, of the input's rows
 * quantised and dequantised times the weight's dequantised values, whether the input comes as FP8 rows or not.
 */
class CpuFp8RowsTest {
    private static final CpuDevice CPU = new CpuDevice(3);

    @AfterAll
    static void close() {
        CPU.close();
    }

    @ParameterizedTest
    @CsvSource({"1, 64, false", "5, 96, true", "70, 200, true"})
    void rmsNormIntoFp8RowsQuantisesItsFp32Result(int rows, int hidden, boolean withResidual) {
        Random rnd = new Random(rows * 31L + hidden);
        float[] x = randomFloats(rnd, rows * hidden, 2.0);
        float[] residual = randomFloats(rnd, rows * hidden, 1.0);
        float[] weight = randomFloats(rnd, hidden, 1.0);
        CpuTensor w = CPU.fromFloats(weight, DType.BF16, hidden);

        CpuTensor res1 = CPU.fromFloats(residual, DType.F32, rows, hidden);
        Fp8Rows fused = Fp8Rows.allocate(CPU, rows, hidden);
        CPU.ops().rmsNorm(CPU.fromFloats(x, DType.BF16, rows, hidden), withResidual ? res1 : null, w, 1e-5f, fused);

        CpuTensor res2 = CPU.fromFloats(residual, DType.F32, rows, hidden);
        CpuTensor normed = CPU.allocate(DType.F32, rows, hidden);
        CPU.ops().rmsNorm(CPU.fromFloats(x, DType.BF16, rows, hidden), withResidual ? res2 : null, w, 1e-5f, normed);
        Fp8Rows separate = Fp8Rows.allocate(CPU, rows, hidden);
        CPU.ops().quantizeRows(normed, separate);

        assertSame(fused, separate);
        assertThat(CPU.toFloats(res1)).containsExactly(CPU.toFloats(res2));
    }

    @ParameterizedTest
    @CsvSource({"1, 128", "9, 40", "65, 256"})
    void siluMulIntoFp8RowsQuantisesItsFp32Result(int rows, int inter) {
        Random rnd = new Random(rows * 17L + inter);
        CpuTensor gateUp = CPU.fromFloats(randomFloats(rnd, rows * 2 * inter, 3.0), DType.BF16, rows, 2L * inter);
        Fp8Rows fused = Fp8Rows.allocate(CPU, rows, inter);
        CPU.ops().siluMul(gateUp, fused);
        CpuTensor act = CPU.allocate(DType.F32, rows, inter);
        CPU.ops().siluMul(gateUp, act);
        Fp8Rows separate = Fp8Rows.allocate(CPU, rows, inter);
        CPU.ops().quantizeRows(act, separate);
        assertSame(fused, separate);
    }

    @ParameterizedTest
    @CsvSource({"1, 48, 64, 1, 64, BF16", "7, 32, 128, 1, 128, F32", "80, 48, 96, 48, 96, BF16",
            "12, 64, 256, 16, 128, F32"})
    void aW8A8ProductMultipliesTheQuantisedRows(int m, int n, int k, int blockRows, int blockCols, DType xType) {
        Random rnd = new Random(m * 7L + n + k);
        float[] xv = randomFloats(rnd, m * k, 1.5);
        for (int i = 0; i < k; i++) {
            xv[i] *= 40; // one row of larger values, so that rows take scales far apart
        }
        Fp8Weight w = randomWeight(rnd, n, k, blockRows, blockCols).quantisingActivations();
        CpuTensor x = CPU.fromFloats(xv, xType, m, k);
        float[] bias = randomFloats(rnd, n, 0.5);
        CpuTensor b = CPU.fromFloats(bias, DType.F32, n);

        CpuTensor direct = CPU.allocate(DType.F32, m, n);
        CPU.ops().matmul(x, w, b, direct);
        Fp8Rows rowsQ = Fp8Rows.allocate(CPU, m, k);
        CPU.ops().quantizeRows(x, rowsQ);
        CpuTensor fromRows = CPU.allocate(DType.F32, m, n);
        CPU.ops().matmul(rowsQ, w, b, fromRows);

        float[] xq = dequantised(rowsQ);
        float[] wq = dequantised(w);
        float[] expected = new float[m * n];
        for (int r = 0; r < m; r++) {
            for (int c = 0; c < n; c++) {
                float s = 0f;
                for (int i = 0; i < k; i++) {
                    s += xq[r * k + i] * wq[c * k + i];
                }
                expected[r * n + c] = s + bias[c];
            }
        }
        assertThat(CPU.toFloats(direct)).containsExactly(expected);
        assertThat(CPU.toFloats(fromRows)).containsExactly(expected);
        float[] scales = CPU.toFloats(rowsQ.scales());
        if (m > 1) {
            assertThat(scales[0]).isGreaterThan(10 * scales[1]);
        }
    }

    @ParameterizedTest
    @CsvSource({"false", "true"})
    void fp8RowsMultiplyOnlyAW8A8Weight(boolean fp8Weight) {
        Random rnd = new Random(5);
        Fp8Rows x = Fp8Rows.allocate(CPU, 2, 64);
        Tensor w = fp8Weight ? randomWeight(rnd, 16, 64, 1, 64) : CPU.fromFloats(randomFloats(rnd, 16 * 64, 1), DType.F32, 16, 64);
        assertThatThrownBy(() -> CPU.ops().matmul(x, w, null, CPU.allocate(DType.F32, 2, 16)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("FP8 rows");
    }

    private static Fp8Weight randomWeight(Random rnd, int n, int k, int blockRows, int blockCols) {
        Fp8Weight w = Fp8Weight.allocate(CPU, n, k, blockRows, blockCols);
        byte[] codes = new byte[n * k];
        for (int i = 0; i < codes.length; i++) {
            do {
                codes[i] = (byte) rnd.nextInt(256);
            } while (Float.isNaN(Float8E4m3.decode(codes[i])));
        }
        CPU.copyFromHost(ByteBuffer.wrap(codes), w.codes());
        float[] scales = new float[(int) w.scales().numel()];
        for (int i = 0; i < scales.length; i++) {
            scales[i] = (float) Math.pow(2, rnd.nextInt(6) - 9) * (1 + rnd.nextFloat());
        }
        CpuTensor s = CpuTensor.of(w.scales());
        System.arraycopy(scales, 0, s.f32(), s.offset(), scales.length);
        return w;
    }

    private static float[] dequantised(Fp8Rows q) {
        return RowOutput.dequantise(q);
    }

    private static float[] dequantised(Fp8Weight w) {
        CpuTensor codes = CpuTensor.of(w.codes());
        float[] s = CPU.toFloats(w.scales());
        int n = (int) w.dim(0);
        int k = (int) w.dim(1);
        int scaleCols = (int) w.scales().dim(1);
        float[] v = new float[n * k];
        for (int r = 0; r < n; r++) {
            for (int c = 0; c < k; c++) {
                v[r * k + c] = Float8E4m3.decode(codes.u8()[codes.offset() + r * k + c])
                        * s[r / w.blockRows() * scaleCols + c / w.blockCols()];
            }
        }
        return v;
    }

    private static byte[] bytes(Tensor u8) {
        CpuTensor t = CpuTensor.of(u8);
        return java.util.Arrays.copyOfRange(t.u8(), t.offset(), t.offset() + t.size());
    }

    private static void assertSame(Fp8Rows actual, Fp8Rows expected) {
        assertThat(bytes(actual.codes())).containsExactly(bytes(expected.codes()));
        assertThat(CPU.toFloats(actual.scales())).containsExactly(CPU.toFloats(expected.scales()));
    }
}
