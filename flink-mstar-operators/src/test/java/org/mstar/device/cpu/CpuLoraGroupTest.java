package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.Tensor;

/**
 * {@code addLoraGroup} on the host: q, k and v of one input into their columns of a fused output equal three
 * {@code addLora} calls bit for bit, and a group that does not pair up is refused.
 */
class CpuLoraGroupTest {
    @Test
    void aGroupEqualsOneAddLoraPerModule() {
        Random rnd = new Random(7);
        int rows = 5;
        int k = 24;
        int rank = 4;
        int stack = 2;
        int[] ns = {16, 8, 8};
        int[] cols = {0, 16, 24};
        try (CpuDevice cpu = new CpuDevice(2);
             Tensor x = cpu.fromFloats(randomFloats(rnd, rows * k, 1), DType.F32, rows, k);
             Tensor sc = cpu.fromFloats(new float[] {0.5f, 2f}, DType.F32, stack);
             Tensor sl = cpu.fromInts(new int[] {1, -1, 0, 1, 0}, rows);
             Tensor grouped = cpu.fromFloats(randomFloats(rnd, rows * 32, 1), DType.F32, rows, 32);
             Tensor each = cpu.zeros(DType.F32, rows, 32)) {
            cpu.copy(grouped, each);
            List<Tensor> a = List.of(stackOf(cpu, rnd, stack, rank, k), stackOf(cpu, rnd, stack, rank, k),
                    stackOf(cpu, rnd, stack, rank, k));
            List<Tensor> b = List.of(stackOf(cpu, rnd, stack, ns[0], rank), stackOf(cpu, rnd, stack, ns[1], rank),
                    stackOf(cpu, rnd, stack, ns[2], rank));
            cpu.ops().addLoraGroup(x, a, b, sc, sl, grouped, cols);
            for (int g = 0; g < 3; g++) {
                cpu.ops().addLora(x, a.get(g), b.get(g), sc, sl, each, cols[g]);
            }
            assertThat(cpu.toFloats(grouped)).containsExactly(cpu.toFloats(each));

            assertThatThrownBy(() -> cpu.ops().addLoraGroup(x, a, b.subList(0, 2), sc, sl, grouped, cols))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("addLoraGroup takes 1 to 3 modules, each with a, b and an output column; got "
                            + "3 a, 2 b and 3 columns");
            a.forEach(Tensor::close);
            b.forEach(Tensor::close);
        }
    }

    private static Tensor stackOf(CpuDevice cpu, Random rnd, int... shape) {
        int n = 1;
        for (int d : shape) {
            n *= d;
        }
        long[] dims = new long[shape.length];
        for (int i = 0; i < shape.length; i++) {
            dims[i] = shape[i];
        }
        return cpu.fromFloats(randomFloats(rnd, n, 0.3), DType.F32, dims);
    }
}
