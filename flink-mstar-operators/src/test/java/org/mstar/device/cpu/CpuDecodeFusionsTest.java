package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.RopeParams;

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
                    DEVICE.ops().gateUpActivation(x, w, geluTanh, DEVICE.allocate(dt, rows, 2 * inter), fused);
                    assertThat(DEVICE.toFloats(fused)).as("%d rows of %s, geluTanh %s", rows, dt, geluTanh)
                            .isEqualTo(DEVICE.toFloats(unfused));
                }
            }
        }
    }

    @Test
    void qkvProjectionRopeAppendEqualsMatmulThenQkvRopeAppend() {
        Random rnd = new Random(22);
        int qHeads = 4;
        int kvHeads = 2;
        int headDim = 16;
        int k = 40;
        int width = (qHeads + 2 * kvHeads) * headDim;
        int layers = 2;
        int pages = 5;
        int pageSize = 4;
        RopeParams[] ropes = {RopeParams.standard(headDim, 10000.0), new RopeParams(8, true, 10000.0, 1.0, false, 0, 0, 0)};
        for (RopeParams rope : ropes) {
            for (DType dt : new DType[] {DType.F32, DType.BF16}) {
                for (boolean withBias : new boolean[] {false, true}) {
                    int n = 3;
                    CpuTensor x = DEVICE.fromFloats(randomFloats(rnd, n * k, 1.0), dt, n, k);
                    CpuTensor w = DEVICE.fromFloats(randomFloats(rnd, width * k, 0.3), DType.BF16, width, k);
                    CpuTensor bias = withBias ? DEVICE.fromFloats(randomFloats(rnd, width, 1.0), dt, width) : null;
                    CpuTensor pos = DEVICE.fromInts(new int[] {7, 4000, 0}, n);
                    CpuTensor pageIdx = DEVICE.fromInts(new int[] {3, 0, 4}, n);
                    CpuTensor offsets = DEVICE.fromInts(new int[] {1, 3, 0}, n);
                    float[] init = randomFloats(rnd, layers * pages * 2 * pageSize * kvHeads * headDim, 1.0);

                    CpuTensor qkv = DEVICE.allocate(dt, n, width);
                    DEVICE.ops().matmul(x, w, bias, qkv);
                    CpuTensor poolA = DEVICE.fromFloats(init, dt, layers, pages, 2, pageSize, kvHeads, headDim);
                    CpuTensor qA = DEVICE.allocate(dt, n, qHeads, headDim);
                    DEVICE.ops().qkvRopeAppend(qkv, pos, rope, poolA, 1, pageIdx, offsets, qA);

                    CpuTensor poolB = DEVICE.fromFloats(init, dt, layers, pages, 2, pageSize, kvHeads, headDim);
                    CpuTensor qB = DEVICE.allocate(dt, n, qHeads, headDim);
                    DEVICE.ops().qkvProjectionRopeAppend(x, w, bias, DEVICE.allocate(dt, n, width), pos, rope, poolB, 1,
                            pageIdx, offsets, qB);

                    assertThat(DEVICE.toFloats(qB)).containsExactly(DEVICE.toFloats(qA));
                    assertThat(DEVICE.toFloats(poolB)).containsExactly(DEVICE.toFloats(poolA));
                }
            }
        }
    }

    @Test
    void gateUpActivationRefusesAWeightOfTheWrongHeight() {
        assertThatThrownBy(() -> DEVICE.ops().gateUpActivation(DEVICE.allocate(DType.F32, 2, 8),
                DEVICE.allocate(DType.F32, 10, 8), false, DEVICE.allocate(DType.F32, 2, 8), DEVICE.allocate(DType.F32, 2, 4)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("must be [8, K]");
    }
}
