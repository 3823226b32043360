package org.mstar.device.cuda.harness;

import static org.mstar.device.cuda.harness.Twin.relErr;
import static org.mstar.device.cuda.harness.Twin.tolerance;

import java.util.ArrayList;
import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.RopeParams;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.harness.Twin.Pair;

/**
 * The latent (MLA) attention ops, CUDA vs CPU, at DeepSeek-V2-Lite's geometry (16 heads, kv_lora_rank 512, a RoPE part
 * of 64, query nope 128, value 128; latent pages of 64 tokens): the latent append of 64 tokens, the absorbed query and
 * the value up-projection of 64 rows, and attention over the latent pool at decode (batch 1 and 64, 4096 keys each),
 * at prefill (one 512-token prompt, causal) and for a 256-token chunk over a cached 3840; fp32 and bf16 (bf16 decode
 * runs the tensor-core kernel, its keys split into slices and merged); and bf16 decode of sequences of unequal lengths
 * (one slice for the short ones, many for the long). Each op runs once on poisoned outputs and is compared, then
 * timed.
 */
final class LatentAttentionChecks {
    private static final int HEADS = 16;
    private static final int RANK = 512;
    private static final int ROPE = 64;
    private static final int NOPE = 128;
    private static final int VALUE = 128;
    private static final int WIDTH = RANK + ROPE;
    private static final int PAGE = 64;
    private static final RopeParams ROPE_PARAMS = new RopeParams(ROPE, true, 10_000.0, 1.0, false, 0, 0, 0);
    private static final float SM_SCALE = (float) (1 / Math.sqrt(NOPE + ROPE));

    private final Twin tw;
    private final List<CheckResult> results = new ArrayList<>();
    /** Tensors of the running check, freed when it ends (the decode pools are hundreds of MB). */
    private final List<Pair> held = new ArrayList<>();

    LatentAttentionChecks(Twin twin) {
        this.tw = twin;
    }

    List<CheckResult> run() {
        for (DType dt : List.of(DType.F32, DType.BF16)) {
            attempt("latentAppend", () -> append(dt, 64));
            attempt("latentQuery", () -> query(dt, 64));
            attempt("latentValues", () -> values(dt, 64));
            attempt("latentAttention decode b1", () -> attention("decode b1", dt, 1, 1, 4096));
            attempt("latentAttention decode b64", () -> attention("decode b64", dt, 64, 1, 4096));
            attempt("latentAttention prefill", () -> attention("prefill", dt, 1, 512, 512));
            attempt("latentAttention chunk", () -> attention("chunk over cache", dt, 1, 256, 4096));
        }
        attempt("latentAttention decode ragged", () -> attention("decode ragged", DType.BF16, new int[] {1, 1, 1, 1, 1},
                new int[] {1, 70, 700, 4096, 130}));
        return results;
    }

    /** {@code rows} sequences of {@code qLen} queries each (causal) over {@code kvLen} keys, pages in reverse order. */
    private void attention(String name, DType dt, int rows, int qLen, int kvLen) {
        int[] qLens = new int[rows];
        int[] kvLens = new int[rows];
        java.util.Arrays.fill(qLens, qLen);
        java.util.Arrays.fill(kvLens, kvLen);
        attention(name, dt, qLens, kvLens);
    }

    private void attempt(String name, Runnable check) {
        try {
            CheckResult.attempt(results, name, check);
        } finally {
            held.forEach(p -> {
                p.cpu().close();
                p.gpu().close();
            });
            held.clear();
        }
    }

    private Pair keep(Pair p) {
        held.add(p);
        return p;
    }

    private Pair random(DType dt, float scale, long... shape) {
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        return keep(tw.floats(tw.randomFloats(Math.toIntExact(n), scale, dt), dt, shape));
    }

    private int[] positions(int n) {
        int[] pos = new int[n];
        for (int i = 0; i < n; i++) {
            pos[i] = 17 + 31 * i;
        }
        return pos;
    }

    private void compare(String op, String shape, DType dt, Pair out, Runnable gpuOp) {
        gpuOp.run();
        double err = relErr(tw.cpu.toFloats(out.cpu()), tw.gpu.toFloats(out.gpu()));
        results.add(new CheckResult(op, shape, dt.toString(), err, tolerance(dt), tw.median(gpuOp), "cpu"));
    }

    private void append(DType dt, int n) {
        int pages = 4;
        Pair kvA = random(dt, 1f, n, WIDTH);
        Pair norm = random(dt, 1f, RANK);
        Pair pos = keep(tw.ints(positions(n), n));
        // zeros, not poison: rows no token addresses must read the same on both devices
        Pair pool = keep(tw.floats(new float[2 * pages * PAGE * WIDTH], dt, 2, pages, 1, PAGE, 1, WIDTH));
        int[] pageIdx = new int[n];
        int[] offsets = new int[n];
        for (int i = 0; i < n; i++) {
            pageIdx[i] = (i * 3) % pages;
            offsets[i] = (i * 7) % PAGE;
        }
        Pair pg = keep(tw.ints(pageIdx, n));
        Pair off = keep(tw.ints(offsets, n));
        tw.cpu.ops().latentAppend(kvA.cpu(), norm.cpu(), 1e-6f, pos.cpu(), ROPE_PARAMS, pool.cpu(), 1, pg.cpu(),
                off.cpu());
        compare("latentAppend", n + " tokens → [2," + pages + ",1," + PAGE + ",1," + WIDTH + "]", dt, pool,
                () -> tw.gpu.ops().latentAppend(kvA.gpu(), norm.gpu(), 1e-6f, pos.gpu(), ROPE_PARAMS, pool.gpu(), 1,
                        pg.gpu(), off.gpu()));
    }

    private void query(DType dt, int n) {
        Pair q = random(dt, 1f, n, HEADS, NOPE + ROPE);
        Pair kvB = random(dt, 0.05f, HEADS, NOPE + VALUE, RANK);
        Pair pos = keep(tw.ints(positions(n), n));
        Pair out = keep(tw.poisoned(dt, n, HEADS, WIDTH));
        tw.cpu.ops().latentQuery(q.cpu(), kvB.cpu(), pos.cpu(), ROPE_PARAMS, out.cpu());
        compare("latentQuery", n + "x" + HEADS + "x" + (NOPE + ROPE) + " → " + WIDTH, dt, out,
                () -> tw.gpu.ops().latentQuery(q.gpu(), kvB.gpu(), pos.gpu(), ROPE_PARAMS, out.gpu()));
    }

    private void values(DType dt, int n) {
        Pair latent = random(dt, 1f, n, HEADS, RANK);
        Pair kvB = random(dt, 0.05f, HEADS, NOPE + VALUE, RANK);
        Pair out = keep(tw.poisoned(dt, n, HEADS, VALUE));
        tw.cpu.ops().latentValues(latent.cpu(), kvB.cpu(), out.cpu());
        compare("latentValues", n + "x" + HEADS + "x" + RANK + " → " + VALUE, dt, out,
                () -> tw.gpu.ops().latentValues(latent.gpu(), kvB.gpu(), out.gpu()));
    }

    /** Sequence r of {@code qLens[r]} queries (causal) over {@code kvLens[r]} keys, pages in reverse order. */
    private void attention(String name, DType dt, int[] qLens, int[] kvLens) {
        int rows = qLens.length;
        int[] qoIndptr = new int[rows + 1];
        int[] kvIndptr = new int[rows + 1];
        int[] last = new int[rows];
        int maxQ = 0;
        int maxKv = 0;
        for (int r = 0; r < rows; r++) {
            int pagesOf = (kvLens[r] + PAGE - 1) / PAGE;
            qoIndptr[r + 1] = qoIndptr[r] + qLens[r];
            kvIndptr[r + 1] = kvIndptr[r] + pagesOf;
            last[r] = kvLens[r] - (pagesOf - 1) * PAGE;
            maxQ = Math.max(maxQ, qLens[r]);
            maxKv = Math.max(maxKv, kvLens[r]);
        }
        int used = kvIndptr[rows];
        int pages = used + 1;
        int[] indices = new int[used];
        for (int i = 0; i < used; i++) {
            indices[i] = pages - 1 - i;
        }
        int totalQo = qoIndptr[rows];
        Pair q = random(dt, 1f, totalQo, HEADS, WIDTH);
        Pair pool = random(dt, 1f, 1, pages, 1, PAGE, 1, WIDTH);
        Pair out = keep(tw.poisoned(dt, totalQo, HEADS, RANK));
        Pair qo = keep(tw.ints(qoIndptr, rows + 1));
        Pair kv = keep(tw.ints(kvIndptr, rows + 1));
        Pair idx = keep(tw.ints(indices, indices.length));
        Pair lastLen = keep(tw.ints(last, rows));
        PagedAttentionPlan cpuPlan = plan(qo.cpu(), kv.cpu(), idx.cpu(), lastLen.cpu(), rows, totalQo, maxQ, maxKv);
        PagedAttentionPlan gpuPlan = plan(qo.gpu(), kv.gpu(), idx.gpu(), lastLen.gpu(), rows, totalQo, maxQ, maxKv);
        tw.cpu.ops().latentAttention(q.cpu(), pool.cpu(), 0, cpuPlan, out.cpu());
        int longest = maxKv;
        String keys = java.util.Arrays.stream(kvLens).allMatch(k -> k == longest) ? "kv" + maxKv : "kv≤" + maxKv;
        String shape = rows + " x q" + maxQ + " " + keys + " h" + HEADS + " w" + WIDTH;
        compare("latentAttention " + name, shape, dt, out,
                () -> tw.gpu.ops().latentAttention(q.gpu(), pool.gpu(), 0, gpuPlan, out.gpu()));
    }

    private static PagedAttentionPlan plan(Tensor qo, Tensor kv, Tensor idx, Tensor last, int rows, int totalQo,
                                           int qLen, int kvLen) {
        return new PagedAttentionPlan(rows, qo, kv, idx, last, PAGE, totalQo, qLen, kvLen, true, -1, false, SM_SCALE);
    }
}
