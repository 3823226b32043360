package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.device.cpu.OpsTestSupport.randomFloats;

import java.nio.ByteBuffer;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.Float8E4m3;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.Tensor;

/**
 * An FP8 (E4M3) KV pool on the CPU: {@code kvAppend} stores each K and V element as the E4M3 code nearest its value
 * (after the rounding to the input's dtype), saturating at ±448; paged attention over it, prefill and decode, equals
 * bit for bit the same attention over an fp32 pool holding the codes' values, since both widen the stored elements
 * to the same fp32 numbers before the same fp32 arithmetic.
 */
class CpuFp8KvAttentionTest {
    private static final CpuDevice CPU = new CpuDevice(2);
    private static final int LAYERS = 2;
    private static final int LAYER = 1;
    private static final int PAGES = 12;
    private static final int PAGE = 8;
    private static final int KV_HEADS = 2;
    private static final int QO_HEADS = 8;
    private static final int HEAD_DIM = 32;
    private static final int TOKEN_ELEMS = KV_HEADS * HEAD_DIM;
    /** Two sequences of 21 and 9 tokens on shuffled pages. */
    private static final int[][] SEQ_PAGES = {{7, 2, 10}, {4, 9}};
    private static final int[] SEQ_LENS = {21, 9};

    @AfterAll
    static void close() {
        CPU.close();
    }

    @Test
    void appendStoresTheNearestCodeOfEachElement() {
        Random rnd = new Random(5);
        int n = SEQ_LENS[0] + SEQ_LENS[1];
        // spread over the format's range: subnormals, normals, and beyond ±448 (saturated)
        float[] k = randomFloats(rnd, n * TOKEN_ELEMS, 3.0);
        float[] v = randomFloats(rnd, n * TOKEN_ELEMS, 0.02);
        k[0] = 1000f;
        k[1] = -600f;
        v[2] = 0.0009f;
        Tensor pool = appended(DType.BF16, k, v);
        byte[] stored = bytes(pool);
        int t = 0;
        for (int s = 0; s < SEQ_LENS.length; s++) {
            for (int pos = 0; pos < SEQ_LENS[s]; pos++, t++) {
                for (int e = 0; e < TOKEN_ELEMS; e++) {
                    int page = SEQ_PAGES[s][pos / PAGE];
                    int slot = pos % PAGE;
                    assertThat(stored[slot(page, 0, slot) + e]).isEqualTo(code(k[t * TOKEN_ELEMS + e]));
                    assertThat(stored[slot(page, 1, slot) + e]).isEqualTo(code(v[t * TOKEN_ELEMS + e]));
                }
            }
        }
        assertThat(stored[slot(SEQ_PAGES[0][0], 0, 0)]).isEqualTo((byte) 0x7E);
        assertThat(stored[slot(SEQ_PAGES[0][0], 0, 0) + 1]).isEqualTo((byte) 0xFE);
    }

    @Test
    void prefillAndDecodeOverFp8PagesEqualTheSameOverTheirValuesInFp32() {
        Random rnd = new Random(11);
        int n = SEQ_LENS[0] + SEQ_LENS[1];
        float[] k = randomFloats(rnd, n * TOKEN_ELEMS, 2.0);
        float[] v = randomFloats(rnd, n * TOKEN_ELEMS, 2.0);
        Tensor fp8 = appended(DType.BF16, k, v);
        // the reference pool: every stored code widened to fp32, pages and slots unchanged
        byte[] codes = bytes(fp8);
        float[] values = new float[codes.length];
        for (int i = 0; i < codes.length; i++) {
            values[i] = Float8E4m3.decode(codes[i]);
        }
        Tensor f32 = CPU.fromFloats(values, DType.F32, LAYERS, PAGES, 2, PAGE, KV_HEADS, HEAD_DIM);
        for (DType qType : new DType[] {DType.F32, DType.BF16}) {
            // prefill: every token a query, causal; decode: the last token of each sequence
            for (boolean decode : new boolean[] {false, true}) {
                int[] qLens = decode ? new int[] {1, 1} : SEQ_LENS;
                int totalQ = qLens[0] + qLens[1];
                float[] q = randomFloats(rnd, totalQ * QO_HEADS * HEAD_DIM, 1.5);
                float[] got = attend(fp8, q, qType, qLens);
                float[] want = attend(f32, q, qType, qLens);
                assertThat(got).as("%s queries, %s", qType, decode ? "decode" : "prefill").isEqualTo(want);
                assertThat(got).as("not all zero").isNotEqualTo(new float[got.length]);
            }
        }
    }

    /** An FP8 pool with the sequences' K and V (given as values of {@code inType}) appended on their pages. */
    private static Tensor appended(DType inType, float[] k, float[] v) {
        Tensor pool = CPU.zeros(DType.F8_E4M3, LAYERS, PAGES, 2, PAGE, KV_HEADS, HEAD_DIM);
        int n = SEQ_LENS[0] + SEQ_LENS[1];
        int[] pages = new int[n];
        int[] offsets = new int[n];
        int t = 0;
        for (int s = 0; s < SEQ_LENS.length; s++) {
            for (int pos = 0; pos < SEQ_LENS[s]; pos++, t++) {
                pages[t] = SEQ_PAGES[s][pos / PAGE];
                offsets[t] = pos % PAGE;
            }
        }
        CPU.ops().kvAppend(pool, LAYER, CPU.fromFloats(k, inType, n, KV_HEADS, HEAD_DIM),
                CPU.fromFloats(v, inType, n, KV_HEADS, HEAD_DIM), CPU.fromInts(pages, n), CPU.fromInts(offsets, n));
        return pool;
    }

    private static float[] attend(Tensor pool, float[] q, DType qType, int[] qLens) {
        int rows = SEQ_LENS.length;
        int[] qoIndptr = new int[rows + 1];
        int[] kvIndptr = new int[rows + 1];
        int[] lastPageLen = new int[rows];
        int[] indices = new int[SEQ_PAGES[0].length + SEQ_PAGES[1].length];
        for (int r = 0; r < rows; r++) {
            qoIndptr[r + 1] = qoIndptr[r] + qLens[r];
            kvIndptr[r + 1] = kvIndptr[r] + SEQ_PAGES[r].length;
            System.arraycopy(SEQ_PAGES[r], 0, indices, kvIndptr[r], SEQ_PAGES[r].length);
            lastPageLen[r] = SEQ_LENS[r] - (SEQ_PAGES[r].length - 1) * PAGE;
        }
        int totalQ = qoIndptr[rows];
        PagedAttentionPlan plan = new PagedAttentionPlan(rows, CPU.fromInts(qoIndptr, rows + 1),
                CPU.fromInts(kvIndptr, rows + 1), CPU.fromInts(indices, indices.length), CPU.fromInts(lastPageLen, rows),
                PAGE, totalQ, Math.max(qLens[0], qLens[1]), Math.max(SEQ_LENS[0], SEQ_LENS[1]), true, -1, false,
                (float) (1 / Math.sqrt(HEAD_DIM)));
        Tensor out = CPU.zeros(qType, totalQ, QO_HEADS, HEAD_DIM);
        CPU.ops().pagedAttention(CPU.fromFloats(q, qType, totalQ, QO_HEADS, HEAD_DIM), pool, LAYER, plan, out);
        return CPU.toFloats(out);
    }

    /** The code stored for an input value: rounded to bf16 first (the appended tensors' dtype), then to E4M3. */
    private static byte code(float x) {
        return Float8E4m3.encode(CPU.toFloats(CPU.fromFloats(new float[] {x}, DType.BF16, 1))[0]);
    }

    private static int slot(int page, int kv, int slot) {
        return (((LAYER * PAGES + page) * 2 + kv) * PAGE + slot) * TOKEN_ELEMS;
    }

    private static byte[] bytes(Tensor pool) {
        byte[] b = new byte[Math.toIntExact(pool.byteSize())];
        CPU.copyToHost(pool, ByteBuffer.wrap(b));
        return b;
    }
}
