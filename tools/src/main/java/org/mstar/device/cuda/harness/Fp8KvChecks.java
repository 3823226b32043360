package org.mstar.device.cuda.harness;

import static org.mstar.device.cuda.harness.Twin.relErr;
import static org.mstar.device.cuda.harness.Twin.shape;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.RopeParams;
import org.mstar.device.cuda.harness.Twin.Pair;

/**
 * FP8 (E4M3) KV pages on the GPU against the CPU: the appends quantise on write (kvAppend of bf16 K and V, the fused
 * split-RoPE-append of Llama-3-8B's heads), compared code for code where the input is the same bf16 (kvAppend: every
 * byte equal) and by the codes' values where the GPU's RoPE may round a bf16 k differently (one code apart at most);
 * then paged attention, decode and prefill, over FP8 pages ({@link AttentionChecks#fp8Kv}).
 */
final class Fp8KvChecks {
    private static final DType FP8 = DType.F8_E4M3;

    private final Twin tw;
    private final List<CheckResult> results = new ArrayList<>();

    Fp8KvChecks(Twin twin) {
        this.tw = twin;
    }

    List<CheckResult> run() {
        CheckResult.attempt(results, "kvAppend F8_E4M3 pool", this::kvAppend);
        CheckResult.attempt(results, "qkvRopeAppend F8_E4M3 pool", this::qkvRopeAppend);
        results.addAll(new AttentionChecks(tw).fp8Kv());
        return results;
    }

    private Pair pool(int layers, int pages, int pageSize, int kvHeads, int headDim) {
        int n = layers * pages * 2 * pageSize * kvHeads * headDim;
        return tw.floats(tw.randomFloats(n, 1f, DType.BF16), FP8, layers, pages, 2, pageSize, kvHeads, headDim);
    }

    /** bf16 K and V of 21 tokens (some beyond ±448, some subnormal in E4M3) into distinct slots: equal bytes. */
    private void kvAppend() {
        int pages = 10;
        int pageSize = 16;
        int kvHeads = 4;
        int headDim = 64;
        Pair pool = pool(3, pages, pageSize, kvHeads, headDim);
        int n = 21;
        int[] pageIdx = new int[n];
        int[] offs = new int[n];
        for (int i = 0; i < n; i++) {
            int slot = i * 7 % (pages * pageSize);
            pageIdx[i] = slot / pageSize;
            offs[i] = slot % pageSize;
        }
        float[] kv = tw.randomFloats(2 * n * kvHeads * headDim, 4f, DType.BF16);
        for (int i = 0; i < kv.length; i += 97) {
            kv[i] *= i % 2 == 0 ? 300f : 1e-3f; // saturated and subnormal codes
        }
        int half = n * kvHeads * headDim;
        Pair k = tw.floats(Arrays.copyOf(kv, half), DType.BF16, n, kvHeads, headDim);
        Pair v = tw.floats(Arrays.copyOfRange(kv, half, 2 * half), DType.BF16, n, kvHeads, headDim);
        Pair pi = tw.ints(pageIdx, n);
        Pair of = tw.ints(offs, n);
        tw.cpu.ops().kvAppend(pool.cpu(), 1, k.cpu(), v.cpu(), pi.cpu(), of.cpu());
        Runnable gpuOp = () -> tw.gpu.ops().kvAppend(pool.gpu(), 1, k.gpu(), v.gpu(), pi.gpu(), of.gpu());
        gpuOp.run();
        results.add(new CheckResult("kvAppend F8_E4M3 pool (bytes differing)", shape(3, pages, 2, pageSize, kvHeads,
                headDim) + " n=" + n, "F8_E4M3", differingBytes(pool), 0, tw.median(gpuOp), "cpu, same codec"));
    }

    /** Llama-3-8B heads with Llama-3.1 RoPE: q as bf16, the pool's codes by their values. */
    private void qkvRopeAppend() {
        int n = 13;
        int qHeads = 32;
        int kvHeads = 8;
        int headDim = 128;
        int pages = 4;
        int pageSize = 16;
        RopeParams params = new RopeParams(128, false, 500000.0, 8.0, true, 1.0, 4.0, 8192.0);
        int width = (qHeads + 2 * kvHeads) * headDim;
        Pair qkv = tw.floats(tw.randomFloats(n * width, 2f, DType.BF16), DType.BF16, n, width);
        Pair pool = pool(2, pages, pageSize, kvHeads, headDim);
        int[] pos = new int[n];
        int[] pageIdx = new int[n];
        int[] offs = new int[n];
        for (int i = 0; i < n; i++) {
            pos[i] = i == 0 ? 131_000 : tw.rnd.nextInt(40_000);
            int slot = i * 5 % (pages * pageSize);
            pageIdx[i] = slot / pageSize;
            offs[i] = slot % pageSize;
        }
        Pair p = tw.ints(pos, n);
        Pair pi = tw.ints(pageIdx, n);
        Pair of = tw.ints(offs, n);
        Pair q = tw.poisoned(DType.BF16, n, qHeads, headDim);
        tw.cpu.ops().qkvRopeAppend(qkv.cpu(), p.cpu(), params, pool.cpu(), 1, pi.cpu(), of.cpu(), q.cpu());
        Runnable gpuOp = () -> tw.gpu.ops().qkvRopeAppend(qkv.gpu(), p.gpu(), params, pool.gpu(), 1, pi.gpu(),
                of.gpu(), q.gpu());
        gpuOp.run();
        double ms = tw.median(gpuOp);
        String s = shape(n, width) + " n=" + n;
        results.add(new CheckResult("qkvRopeAppend q (F8_E4M3 pool)", s, "BF16",
                relErr(tw.cpu.toFloats(q.cpu()), tw.gpu.toFloats(q.gpu())), Twin.tolerance(DType.BF16), ms, "cpu"));
        // a k a bf16 rounding apart lands on the neighbouring code only at a code boundary: rare, one step each
        results.add(new CheckResult("qkvRopeAppend F8_E4M3 pool (code values)", s, "F8_E4M3",
                relErr(tw.cpu.toFloats(pool.cpu()), tw.gpu.toFloats(pool.gpu())), Twin.tolerance(DType.BF16), ms,
                "cpu, same codec"));
    }

    /** The fraction of the pool's bytes that differ between the devices. */
    private double differingBytes(Pair pool) {
        int n = Math.toIntExact(pool.cpu().byteSize());
        ByteBuffer a = ByteBuffer.allocate(n);
        ByteBuffer b = ByteBuffer.allocate(n);
        tw.cpu.copyToHost(pool.cpu(), a);
        tw.gpu.copyToHost(pool.gpu(), b);
        int differing = 0;
        for (int i = 0; i < n; i++) {
            differing += a.get(i) != b.get(i) ? 1 : 0;
        }
        return differing / (double) n;
    }
}
