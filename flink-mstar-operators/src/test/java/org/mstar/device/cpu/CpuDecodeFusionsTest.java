package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;

/** The fused decode ops equal the unfused sequences they replace, bit for bit on the CPU. */
class CpuDecodeFusionsTest {
    private static final CpuDevice DEVICE = new CpuDevice(3);

    @AfterAll
    static void close() {
        DEVICE.close();
    }

    @Test
    void gateUpActivationEqualsMatmulThenActivation() {
        Random rnd = new Random(21);
        int k = 72;
        int inter = 37;
        for (int rows : new int[] {1, 3, 9}) {
            for (DType dt : new DType[] {DType.F32, DType.BF16}) {
                for (boolean geluTanh : new boolean[] {false, true}) {
                    CpuTensor x = DEVICE.fromFloats(randomFloats(rnd, rows * k, 1.0), dt, rows, k);
                    CpuTensor w = DEVICE.fromFloats(randomFloats(rnd, 2 * inter * k, 0.2), DType.BF16, 2 * inter, k);
                    CpuTensor gateUp = DEVICE.allocate(dt, rows, 2 * inter);
                    CpuTensor unfused = DEVICE.allocate(dt, rows, inter);
                    DEVICE.ops().matmul(x, w, null, gateUp);
                    if (geluTanh) {
                        DEVICE.ops().geluTanhMul(gateUp, unfused);
                    } else {
                        DEVICE.ops().siluMul(gateUp, unfused);
                    }
                    CpuTensor fused = DEVICE.allocate(dt, rows, inter);
                    DEVICE.ops().gateUpActivation(x, w, geluTanh, fused);
                    assertThat(DEVICE.toFloats(fused)).as("%d rows of %s, geluTanh %s", rows, dt, geluTanh)
                            .isEqualTo(DEVICE.toFloats(unfused));
                }
            }
        }
    }

    @Test
    void gateUpActivationRefusesAWeightOfTheWrongHeight() {
        assertThatThrownBy(() -> DEVICE.ops().gateUpActivation(DEVICE.allocate(DType.F32, 2, 8),
                DEVICE.allocate(DType.F32, 10, 8), false, DEVICE.allocate(DType.F32, 2, 4)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("must be [8, K]");
    }
}
