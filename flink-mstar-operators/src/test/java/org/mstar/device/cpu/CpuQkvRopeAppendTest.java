package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.RopeParams;

/**
 * The fused qkvRopeAppend equals splitQkv → rope → kvAppend bit for bit, and qkNormRopeAppend the same with an RMSNorm
 * of each q and k head before the rotation.
 */
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

    @Test
    void withHeadNormsMatchesTheUnfusedSequenceAndNormalises() {
        for (DType act : new DType[] {DType.F32, DType.BF16}) {
            Inputs in = new Inputs(act);
            RopeParams rope = RopeParams.standard(HEAD_DIM, 1000000.0);
            Random rnd = new Random(5);
            CpuTensor qNorm = DEVICE.fromFloats(randomFloats(rnd, HEAD_DIM, 1.0), act, HEAD_DIM);
            CpuTensor kNorm = DEVICE.fromFloats(randomFloats(rnd, HEAD_DIM, 1.0), act, HEAD_DIM);
            float eps = 1e-6f;

            CpuTensor poolA = pool(in.poolInit, DType.BF16);
            CpuTensor qA = DEVICE.allocate(act, N, Q_HEADS, HEAD_DIM);
            CpuTensor k = DEVICE.allocate(act, N, KV_HEADS, HEAD_DIM);
            CpuTensor v = DEVICE.allocate(act, N, KV_HEADS, HEAD_DIM);
            DEVICE.ops().splitQkv(in.qkv, qA, k, v);
            DEVICE.ops().rmsNorm(qA.reshape(N * Q_HEADS, HEAD_DIM), null, qNorm, eps, qA.reshape(N * Q_HEADS, HEAD_DIM));
            DEVICE.ops().rmsNorm(k.reshape(N * KV_HEADS, HEAD_DIM), null, kNorm, eps, k.reshape(N * KV_HEADS, HEAD_DIM));
            DEVICE.ops().rope(qA, k, in.pos, rope);
            DEVICE.ops().kvAppend(poolA, 1, k, v, in.pages, in.offsets);

            CpuTensor poolB = pool(in.poolInit, DType.BF16);
            CpuTensor qB = DEVICE.allocate(act, N, Q_HEADS, HEAD_DIM);
            DEVICE.ops().qkNormRopeAppend(in.qkv, qNorm, kNorm, eps, in.pos, rope, poolB, 1, in.pages, in.offsets, qB);
            assertThat(DEVICE.toFloats(qB)).containsExactly(DEVICE.toFloats(qA));
            assertThat(DEVICE.toFloats(poolB)).containsExactly(DEVICE.toFloats(poolA));

            // and the norms did act: without them q differs
            CpuTensor qC = DEVICE.allocate(act, N, Q_HEADS, HEAD_DIM);
            DEVICE.ops().qkvRopeAppend(in.qkv, in.pos, rope, pool(in.poolInit, DType.BF16), 1, in.pages, in.offsets, qC);
            assertThat(DEVICE.toFloats(qC)).isNotEqualTo(DEVICE.toFloats(qB));
        }
    }

    /** A qkv batch, its positions and distinct pool slots, and the pool's first contents. */
    private static final class Inputs {
        final CpuTensor qkv;
        final CpuTensor pos;
        final CpuTensor pages;
        final CpuTensor offsets;
        final float[] poolInit;

        Inputs(DType act) {
            Random rnd = new Random(3);
            int width = (Q_HEADS + 2 * KV_HEADS) * HEAD_DIM;
            qkv = DEVICE.fromFloats(randomFloats(rnd, N * width, 2.0), act, N, width);
            int[] positions = new int[N];
            int[] pageIdx = new int[N];
            int[] slots = new int[N];
            for (int i = 0; i < N; i++) {
                positions[i] = rnd.nextInt(5000);
                int slot = i * 3 % (PAGES * PAGE_SIZE); // distinct slots
                pageIdx[i] = slot / PAGE_SIZE;
                slots[i] = slot % PAGE_SIZE;
            }
            pos = DEVICE.fromInts(positions, N);
            pages = DEVICE.fromInts(pageIdx, N);
            offsets = DEVICE.fromInts(slots, N);
            poolInit = randomFloats(rnd, LAYERS * PAGES * 2 * PAGE_SIZE * KV_HEADS * HEAD_DIM, 1.0);
        }
    }

    private static void check(RopeParams rope, DType act, DType poolType) {
        Inputs in = new Inputs(act);
        CpuTensor poolA = pool(in.poolInit, poolType);
        CpuTensor qA = DEVICE.allocate(act, N, Q_HEADS, HEAD_DIM);
        CpuTensor k = DEVICE.allocate(act, N, KV_HEADS, HEAD_DIM);
        CpuTensor v = DEVICE.allocate(act, N, KV_HEADS, HEAD_DIM);
        DEVICE.ops().splitQkv(in.qkv, qA, k, v);
        DEVICE.ops().rope(qA, k, in.pos, rope);
        DEVICE.ops().kvAppend(poolA, 1, k, v, in.pages, in.offsets);

        CpuTensor poolB = pool(in.poolInit, poolType);
        CpuTensor qB = DEVICE.allocate(act, N, Q_HEADS, HEAD_DIM);
        DEVICE.ops().qkvRopeAppend(in.qkv, in.pos, rope, poolB, 1, in.pages, in.offsets, qB);

        assertThat(DEVICE.toFloats(qB)).containsExactly(DEVICE.toFloats(qA));
        assertThat(DEVICE.toFloats(poolB)).containsExactly(DEVICE.toFloats(poolA));
    }

    private static CpuTensor pool(float[] init, DType dtype) {
        return DEVICE.fromFloats(init, dtype, LAYERS, PAGES, 2, PAGE_SIZE, KV_HEADS, HEAD_DIM);
    }
}
