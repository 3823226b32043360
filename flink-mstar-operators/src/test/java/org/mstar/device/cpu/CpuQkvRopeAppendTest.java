package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.RopeParams;

/** The fused qkvRopeAppend equals splitQkv → rope → kvAppend bit for bit. */
class CpuQkvRopeAppendTest {
    private static final CpuDevice DEVICE = new CpuDevice(2);
    private static final int N = 6;
    private static final int Q_HEADS = 4;
    private static final int KV_HEADS = 2;
    private static final int HEAD_DIM = 16;
    private static final int LAYERS = 2;
    private static final int PAGES = 5;
    private static final int PAGE_SIZE = 4;

    @AfterAll
    static void close() {
        DEVICE.close();
    }

    @Test
    void matchesTheUnfusedSequence() {
        RopeParams[] ropes = {RopeParams.standard(HEAD_DIM, 10000.0),
            new RopeParams(8, true, 10000.0, 1.0, false, 0, 0, 0)};
        DType[][] dtypes = {{DType.F32, DType.F32}, {DType.BF16, DType.BF16}, {DType.BF16, DType.F32},
            {DType.F32, DType.BF16}};
        for (RopeParams rope : ropes) {
            for (DType[] dt : dtypes) {
                check(rope, dt[0], dt[1]);
            }
        }
    }

    private static void check(RopeParams rope, DType act, DType poolType) {
        Random rnd = new Random(3);
        int width = (Q_HEADS + 2 * KV_HEADS) * HEAD_DIM;
        CpuTensor qkv = DEVICE.fromFloats(randomFloats(rnd, N * width, 2.0), act, N, width);
        int[] pos = new int[N];
        int[] pageIdx = new int[N];
        int[] offsets = new int[N];
        for (int i = 0; i < N; i++) {
            pos[i] = rnd.nextInt(5000);
            int slot = i * 3 % (PAGES * PAGE_SIZE); // distinct slots
            pageIdx[i] = slot / PAGE_SIZE;
            offsets[i] = slot % PAGE_SIZE;
        }
        CpuTensor posT = DEVICE.fromInts(pos, N);
        CpuTensor pagesT = DEVICE.fromInts(pageIdx, N);
        CpuTensor offsetsT = DEVICE.fromInts(offsets, N);
        float[] poolInit = randomFloats(rnd, LAYERS * PAGES * 2 * PAGE_SIZE * KV_HEADS * HEAD_DIM, 1.0);

        CpuTensor poolA = pool(poolInit, poolType);
        CpuTensor qA = DEVICE.allocate(act, N, Q_HEADS, HEAD_DIM);
        CpuTensor k = DEVICE.allocate(act, N, KV_HEADS, HEAD_DIM);
        CpuTensor v = DEVICE.allocate(act, N, KV_HEADS, HEAD_DIM);
        DEVICE.ops().splitQkv(qkv, qA, k, v);
        DEVICE.ops().rope(qA, k, posT, rope);
        DEVICE.ops().kvAppend(poolA, 1, k, v, pagesT, offsetsT);

        CpuTensor poolB = pool(poolInit, poolType);
        CpuTensor qB = DEVICE.allocate(act, N, Q_HEADS, HEAD_DIM);
        DEVICE.ops().qkvRopeAppend(qkv, posT, rope, poolB, 1, pagesT, offsetsT, qB);

        assertThat(DEVICE.toFloats(qB)).containsExactly(DEVICE.toFloats(qA));
        assertThat(DEVICE.toFloats(poolB)).containsExactly(DEVICE.toFloats(poolA));
    }

    private static CpuTensor pool(float[] init, DType dtype) {
        return DEVICE.fromFloats(init, dtype, LAYERS, PAGES, 2, PAGE_SIZE, KV_HEADS, HEAD_DIM);
    }
}
