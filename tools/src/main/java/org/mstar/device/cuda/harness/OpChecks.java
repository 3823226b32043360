package org.mstar.device.cuda.harness;

import static org.mstar.device.cuda.harness.Twin.relErr;
import static org.mstar.device.cuda.harness.Twin.shape;
import static org.mstar.device.cuda.harness.Twin.tolerance;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.mstar.device.ComputeOps;
import org.mstar.device.ProjectionOps;
import org.mstar.device.DType;
import org.mstar.device.KernelOptions;
import org.mstar.device.RopeParams;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.device.cuda.CudaGraph;
import org.mstar.device.cuda.harness.Twin.Pair;

/**
 * CUDA vs CPU for the dense ops: embedding, RMSNorm (plain, fused residual, and per head in place with fp32 weights as
 * Qwen3's and Gemma 3's q/k norms run), add, SiLU·mul, GELU-tanh·mul, scale in place, qkv split, matmul,
 * RoPE, KV append, fused qkv split + RoPE + KV append, row and page copies, the encoder ops (LayerNorm, exact GELU,
 * conv1d at Whisper's stem shapes), the gate/up projection + activation and qkv projection + RoPE + KV append
 * composites, batched LoRA (each row its adapter slot's low-rank update into part of a fused output), argmax, and one
 * CUDA-graph replay. Each op runs once on poisoned
 * outputs and is compared; only then is it timed over further runs (which may change in-place outputs).
 */
final class OpChecks {
    private final Twin tw;
    private final List<CheckResult> results = new ArrayList<>();

    OpChecks(Twin twin) {
        this.tw = twin;
    }

    List<CheckResult> run() {
        for (DType dt : List.of(DType.F32, DType.BF16)) {
            attempt("embedding", () -> embedding(dt));
            attempt("rmsNorm", () -> rmsNorm("rmsNorm", dt, dt, dt, 7, 4096, false));
            attempt("rmsNorm+residual", () -> rmsNorm("rmsNorm+residual", dt, dt, dt, 5, 1000, true));
            attempt("add", () -> add(dt));
            attempt("siluMul", () -> siluMul(dt));
            attempt("geluTanhMul", () -> geluTanhMul(dt));
            attempt("scale in place", () -> scaleInPlace(dt));
            attempt("rmsNorm per head in place", () -> headNormInPlace(dt));
            attempt("splitQkv", () -> splitQkv(dt));
            attempt("matmul", () -> matmul(dt, dt, 5, 512, 384, false));
            attempt("matmul+bias", () -> matmul(dt, dt, 33, 1024, 640, true));
            attempt("rope neox", () -> rope(dt, RopeParams.standard(128, 500000.0), "neox"));
            attempt("rope gptj-partial", () -> rope(dt, new RopeParams(32, true, 10000.0, 1.0, false, 0, 0, 0),
                    "gptj-partial"));
            attempt("rope linear4", () -> rope(dt, new RopeParams(128, false, 10000.0, 4.0, false, 0, 0, 0), "linear4"));
            attempt("rope llama31", () -> rope(dt, new RopeParams(128, false, 500000.0, 8.0, true, 1.0, 4.0, 8192.0),
                    "llama31"));
            attempt("kvAppend", () -> kvAppend(dt));
            attempt("qkvRopeAppend", () -> qkvRopeAppend(dt));
            attempt("qkNormRopeAppend", () -> qkNormRopeAppend(dt));
            attempt("gatherRows", () -> gatherRows(dt));
            attempt("pages", () -> pages(dt));
            attempt("layerNorm", () -> layerNorm(dt, 7, 768, false));
            attempt("layerNorm+residual", () -> layerNorm(dt, 5, 1280, true));
            attempt("layerNorm in place", () -> layerNormInPlace(dt));
            attempt("gelu", () -> gelu(dt));
            attempt("conv1d whisper conv1", () -> conv1d(dt, dt, 3000, 80, 768, 1));
            attempt("conv1d whisper conv2", () -> conv1d(dt, dt, 3000, 768, 768, 2));
            // decode rows of 8 adapters into Llama-3-8B's k columns of the fused qkv, and a prefill of runs of rows
            attempt("addLora", () -> addLora(dt, 64, 4096, new int[] {1024}, new int[] {4096}, 16, 8, 6144, 1));
            attempt("addLora", () -> addLora(dt, 300, 4096, new int[] {4096}, new int[] {0}, 64, 4, 4096, 75));
            // Llama-3-8B's q, k and v in one call over 64 adapters, gate and up over 8, and prefill runs of q, k and v
            attempt("addLoraGroup", () -> addLora(dt, 64, 4096, new int[] {4096, 1024, 1024},
                    new int[] {0, 4096, 5120}, 16, 64, 6144, 1));
            attempt("addLoraGroup", () -> addLora(dt, 64, 4096, new int[] {14336, 14336}, new int[] {0, 14336}, 16, 8,
                    28672, 1));
            attempt("addLoraGroup", () -> addLora(dt, 300, 4096, new int[] {4096, 1024, 1024},
                    new int[] {0, 4096, 5120}, 16, 4, 6144, 75));
        }
        // a bf16 model's norms: bf16 rows added to an fp32 residual stream, and the fp32 embeddings normalised
        for (int rows : new int[] {3, 256}) {
            attempt("rmsNorm bf16 + fp32 residual", () -> rmsNorm("rmsNorm bf16 + fp32 residual", DType.BF16,
                    DType.F32, DType.BF16, rows, 4096, true));
        }
        attempt("rmsNorm fp32 -> bf16", () -> rmsNorm("rmsNorm fp32 -> bf16", DType.F32, DType.F32, DType.BF16, 5, 4096,
                false));
        attempt("conv1d mixed", () -> conv1d(DType.F32, DType.BF16, 2999, 128, 384, 2));
        // The composite decode ops: Llama-3.2-1B's MLP at decode batch sizes, Llama-3-8B's at batch 1, a GELU-tanh
        // MLP (Gemma) at an odd width, and fp32 activations
        for (int rows : new int[] {1, 4, 16, 32, 33}) {
            attempt("gateUpActivation", () -> gateUpActivation(DType.BF16, rows, 2048, 8192, false));
        }
        attempt("gateUpActivation", () -> gateUpActivation(DType.BF16, 1, 4096, 14336, false));
        attempt("gateUpActivation", () -> gateUpActivation(DType.BF16, 16, 4096, 14336, false));
        attempt("gateUpActivation", () -> gateUpActivation(DType.BF16, 3, 640, 2056, true));
        attempt("gateUpActivation", () -> gateUpActivation(DType.BF16, 5, 640, 2052, false));
        attempt("gateUpActivation", () -> gateUpActivation(DType.F32, 2, 2048, 8192, false));
        // Llama-3.2-1B's attention input (32 q / 8 kv heads of 64, Llama-3.1 RoPE), Llama-3-8B's at batch 1, and a
        // biased projection with partial interleaved RoPE
        RopeParams llama31 = new RopeParams(64, false, 500000.0, 32.0, true, 1.0, 4.0, 8192.0);
        for (int rows : new int[] {1, 3, 16}) {
            attempt("qkvProjectionRopeAppend", () -> qkvProjection(DType.BF16, rows, 2048, 32, 8, 64, llama31, false));
        }
        attempt("qkvProjectionRopeAppend", () -> qkvProjection(DType.BF16, 1, 4096, 32, 8, 128,
                new RopeParams(128, false, 500000.0, 8.0, true, 1.0, 4.0, 8192.0), false));
        attempt("qkvProjectionRopeAppend", () -> qkvProjection(DType.F32, 2, 1024, 8, 2, 64,
                new RopeParams(32, true, 10000.0, 1.0, false, 0, 0, 0), true));
        attempt("matmul mixed", () -> matmul(DType.F32, DType.BF16, 9, 256, 320, true));
        // The skinny kernel's three instantiations (1-8, 9-16, 17-32 rows) with partial row tiles, an N that is
        // not a multiple of 16, a K whose last group of chunks is partial, bf16 and fp32 outputs.
        for (int rows : new int[] {1, 7, 13, 16, 25, 32}) {
            attempt("matmul skinny", () -> skinnyMatmul(rows, 1000, 576, rows % 2 == 0 ? DType.F32 : DType.BF16, null));
        }
        attempt("matmul skinny", () -> skinnyMatmul(3, 4096, 4160, DType.BF16, null));
        // the shapes above take the pipelined body at up to 16 rows (few tiles); 384 tiles of K 4096 take the plain one
        attempt("matmul skinny", () -> skinnyMatmul(1, 6144, 4096, DType.BF16, null));
        attempt("matmul skinny", () -> skinnyMatmul(16, 6144, 4096, DType.F32, null));
        // a bias in the epilogue (Whisper's projections), bf16 and fp32
        attempt("matmul skinny", () -> skinnyMatmul(1, 3840, 1280, DType.BF16, DType.BF16));
        attempt("matmul skinny", () -> skinnyMatmul(16, 1000, 576, DType.F32, DType.F32));
        for (int rows : new int[] {1, 9, 256}) {
            attempt("argmax", () -> argmax(rows));
        }
        attempt("cudaGraph", this::graphReplay);
        return results;
    }

    private void attempt(String name, Runnable check) {
        CheckResult.attempt(results, name, check);
    }

    private double err(Pair out) {
        return relErr(tw.cpu.toFloats(out.cpu()), tw.gpu.toFloats(out.gpu()));
    }

    /** Runs the op once, compares {@code out}, then times further runs. */
    private void check(String op, String shape, Pair out, Runnable gpuOp) {
        gpuOp.run();
        double err = err(out);
        DType dt = out.gpu().dtype();
        results.add(new CheckResult(op, shape, dt.toString(), err, tolerance(dt), tw.median(gpuOp), "cpu"));
    }

    private void embedding(DType dt) {
        int vocab = 1000;
        int hidden = 256;
        int n = 37;
        Pair table = tw.floats(tw.randomFloats(vocab * hidden, 1f, dt), dt, vocab, hidden);
        int[] ids = new int[n];
        for (int i = 0; i < n; i++) {
            ids[i] = tw.rnd.nextInt(vocab);
        }
        Pair idT = tw.ints(ids, n);
        Pair out = tw.poisoned(dt, n, hidden);
        tw.cpu.ops().embedding(table.cpu(), idT.cpu(), out.cpu());
        check("embedding", shape(vocab, hidden) + "x" + n, out,
                () -> tw.gpu.ops().embedding(table.gpu(), idT.gpu(), out.gpu()));
    }

    /**
     * x of {@code xType}, weights and output of {@code outType}; with a residual of {@code resType}, the updated
     * residual stream is compared too.
     */
    private void rmsNorm(String name, DType xType, DType resType, DType outType, int rows, int hidden,
            boolean withResidual) {
        Pair x = tw.floats(tw.randomFloats(rows * hidden, 2f, xType), xType, rows, hidden);
        Pair w = tw.floats(tw.randomFloats(hidden, 1f, outType), outType, hidden);
        Pair res = withResidual ? tw.floats(tw.randomFloats(rows * hidden, 2f, resType), resType, rows, hidden) : null;
        Pair out = tw.poisoned(outType, rows, hidden);
        tw.cpu.ops().rmsNorm(x.cpu(), res == null ? null : res.cpu(), w.cpu(), 1e-5f, out.cpu());
        Runnable gpuOp = () -> tw.gpu.ops().rmsNorm(x.gpu(), res == null ? null : res.gpu(), w.gpu(), 1e-5f, out.gpu());
        gpuOp.run();
        double outErr = err(out);
        double resErr = res == null ? 0 : err(res);
        double ms = tw.median(gpuOp);
        results.add(new CheckResult(name, shape(rows, hidden), outType.toString(), outErr, tolerance(outType), ms,
                "cpu"));
        if (res != null) {
            results.add(new CheckResult(name + " (residual)", shape(rows, hidden), resType.toString(), resErr,
                    tolerance(resType), ms, "cpu"));
        }
    }

    /** Whisper-small and -large widths; with a residual, the updated residual stream is compared too. */
    private void layerNorm(DType dt, int rows, int hidden, boolean withResidual) {
        Pair x = tw.floats(tw.randomFloats(rows * hidden, 2f, dt), dt, rows, hidden);
        Pair w = tw.floats(tw.randomFloats(hidden, 1f, dt), dt, hidden);
        Pair b = tw.floats(tw.randomFloats(hidden, 1f, dt), dt, hidden);
        Pair res = withResidual ? tw.floats(tw.randomFloats(rows * hidden, 2f, dt), dt, rows, hidden) : null;
        Pair out = tw.poisoned(dt, rows, hidden);
        tw.cpu.ops().layerNorm(x.cpu(), res == null ? null : res.cpu(), w.cpu(), b.cpu(), 1e-5f, out.cpu());
        Runnable gpuOp = () -> tw.gpu.ops().layerNorm(x.gpu(), res == null ? null : res.gpu(), w.gpu(), b.gpu(), 1e-5f,
                out.gpu());
        if (!withResidual) {
            check("layerNorm", shape(rows, hidden), out, gpuOp);
            return;
        }
        gpuOp.run();
        double outErr = err(out);
        double resErr = err(res);
        double ms = tw.median(gpuOp);
        results.add(new CheckResult("layerNorm+residual", shape(rows, hidden), dt.toString(), outErr, tolerance(dt), ms,
                "cpu"));
        results.add(new CheckResult("layerNorm+residual (residual)", shape(rows, hidden), dt.toString(), resErr,
                tolerance(dt), ms, "cpu"));
    }

    /** Rows offset from zero (so the mean matters), no bias, out = x; compared after the first run. */
    private void layerNormInPlace(DType dt) {
        int rows = 11;
        int hidden = 1000;
        float[] v = tw.randomFloats(rows * hidden, 1f, dt);
        for (int i = 0; i < v.length; i++) {
            v[i] = Twin.rounded(v[i] + 3f * (i / hidden % 3 - 1), dt);
        }
        Pair x = tw.floats(v, dt, rows, hidden);
        Pair w = tw.floats(tw.randomFloats(hidden, 1f, DType.F32), DType.F32, hidden);
        tw.cpu.ops().layerNorm(x.cpu(), null, w.cpu(), null, 1e-5f, x.cpu());
        tw.gpu.ops().layerNorm(x.gpu(), null, w.gpu(), null, 1e-5f, x.gpu());
        results.add(new CheckResult("layerNorm in place", shape(rows, hidden), dt.toString(), err(x), tolerance(dt),
                tw.median(() -> tw.gpu.ops().layerNorm(x.gpu(), null, w.gpu(), null, 1e-5f, x.gpu())), "cpu"));
    }

    /** Whisper-small's MLP width, over both tails. */
    private void gelu(DType dt) {
        int rows = 6;
        int inter = 3072;
        Pair x = tw.floats(tw.randomFloats(rows * inter, 6f, dt), dt, rows, inter);
        Pair out = tw.poisoned(dt, rows, inter);
        tw.cpu.ops().gelu(x.cpu(), out.cpu());
        check("gelu", shape(rows, inter), out, () -> tw.gpu.ops().gelu(x.gpu(), out.gpu()));
    }

    /** Whisper's stem (kernel 3, padding 1), frames-major: [frames, in] → [frames / stride, out]. */
    private void conv1d(DType xt, DType wt, int frames, int in, int outChannels, int stride) {
        int kernel = 3;
        int outFrames = ProjectionOps.conv1dOutFrames(frames, kernel, stride, 1);
        Pair x = tw.floats(tw.randomFloats(frames * in, 1f, xt), xt, frames, in);
        Pair w = tw.floats(tw.randomFloats(outChannels * in * kernel, 0.1f, wt), wt, outChannels, in, kernel);
        Pair b = tw.floats(tw.randomFloats(outChannels, 1f, wt), wt, outChannels);
        Pair out = tw.poisoned(xt, outFrames, outChannels);
        tw.cpu.ops().conv1d(x.cpu(), w.cpu(), b.cpu(), stride, 1, out.cpu());
        check("conv1d" + (xt != wt ? " x" + xt + "·w" + wt : "") + " stride " + stride,
                shape(frames, in) + "*" + shape(outChannels, in, kernel), out,
                () -> tw.gpu.ops().conv1d(x.gpu(), w.gpu(), b.gpu(), stride, 1, out.gpu()));
    }

    /** The gate/up projection + activation against the CPU. */
    private void gateUpActivation(DType act, int rows, int k, int inter, boolean geluTanh) {
        Pair x = tw.floats(tw.randomFloats(rows * k, 1f, act), act, rows, k);
        Pair w = tw.floats(tw.randomFloats(2 * inter * k, 0.05f, DType.BF16), DType.BF16, 2 * inter, k);
        Pair out = tw.poisoned(act, rows, inter);
        Pair gateUp = tw.poisoned(act, rows, 2 * inter);
        tw.cpu.ops().gateUpActivation(x.cpu(), w.cpu(), geluTanh, gateUp.cpu(), out.cpu());
        String fn = geluTanh ? "geluTanhMul" : "siluMul";
        String s = shape(rows, k) + "·" + shape(2 * inter, k) + "ᵀ";
        check("gateUpActivation " + fn, s, out,
                () -> tw.gpu.ops().gateUpActivation(x.gpu(), w.gpu(), geluTanh, gateUp.gpu(), out.gpu()));
        // bit for bit the GPU's own pair of ops, whichever path the fused op took
        Tensor pairGateUp = tw.gpu.allocate(act, rows, 2 * inter);
        Tensor pairOut = tw.gpu.allocate(act, rows, inter);
        tw.gpu.ops().matmul(x.gpu(), w.gpu(), null, pairGateUp);
        if (geluTanh) {
            tw.gpu.ops().geluTanhMul(pairGateUp, pairOut);
        } else {
            tw.gpu.ops().siluMul(pairGateUp, pairOut);
        }
        double differ = Twin.bitMismatches(tw.gpu.toFloats(pairOut), tw.gpu.toFloats(out.gpu()));
        results.add(new CheckResult("gateUpActivation " + fn + " vs matmul + " + fn, s, act.toString(), differ, 0, 0,
                "gpu, unfused"));
        pairGateUp.close();
        pairOut.close();
    }

    /** The qkv projection + split + RoPE + KV append against the CPU (q and the whole pool). */
    private void qkvProjection(DType act, int n, int k, int qHeads, int kvHeads, int headDim, RopeParams rope,
            boolean withBias) {
        int width = (qHeads + 2 * kvHeads) * headDim;
        int pages = 4;
        int pageSize = 16;
        Pair x = tw.floats(tw.randomFloats(n * k, 1f, act), act, n, k);
        Pair w = tw.floats(tw.randomFloats(width * k, 0.05f, DType.BF16), DType.BF16, width, k);
        Pair b = withBias ? tw.floats(tw.randomFloats(width, 1f, act), act, width) : null;
        long[] poolShape = {2, pages, 2, pageSize, kvHeads, headDim};
        float[] poolData = tw.randomFloats(2 * pages * 2 * pageSize * kvHeads * headDim, 1f, act);
        Pair pool = tw.floats(poolData, act, poolShape);
        AppendRows rows = appendRows(n, pages, pageSize);
        Pair p = rows.positions();
        Pair pi = rows.pages();
        Pair of = rows.offsets();
        Pair q = tw.poisoned(act, n, qHeads, headDim);
        Pair qkv = tw.poisoned(act, n, width);
        tw.cpu.ops().qkvProjectionRopeAppend(x.cpu(), w.cpu(), b == null ? null : b.cpu(), qkv.cpu(), p.cpu(), rope,
                pool.cpu(), 1, pi.cpu(), of.cpu(), q.cpu());
        String s = shape(n, k) + "·" + shape(width, k) + "ᵀ" + (withBias ? "+bias" : "") + " rope" + rope.rotaryDim();
        // the pair (matmul, then qkv_rope_append) against the CPU; then RoPE and the append in the skinny matmul's
        // epilogue (where it applies), bit for bit the pair
        CudaDevice pair = tw.gpu.withOptions(tw.gpu.options().withQkvRopeInMatmul(false));
        CudaDevice inMatmul = tw.gpu.withOptions(tw.gpu.options().withQkvRopeInMatmul(true));
        Runnable op = () -> pair.ops().qkvProjectionRopeAppend(x.gpu(), w.gpu(), b == null ? null : b.gpu(),
                qkv.gpu(), p.gpu(), rope, pool.gpu(), 1, pi.gpu(), of.gpu(), q.gpu());
        Tensor fusedPool = tw.gpu.fromFloats(poolData, act, poolShape);
        Tensor fusedQ = Twin.poison(tw.gpu, tw.gpu.allocate(act, n, qHeads, headDim));
        Runnable fused = () -> inMatmul.ops().qkvProjectionRopeAppend(x.gpu(), w.gpu(), b == null ? null : b.gpu(),
                qkv.gpu(), p.gpu(), rope, fusedPool, 1, pi.gpu(), of.gpu(), fusedQ);
        try {
            op.run();
            double ms = tw.median(op);
            results.add(new CheckResult("qkvProjectionRopeAppend q", s, act.toString(), err(q), tolerance(act), ms,
                    "cpu"));
            results.add(new CheckResult("qkvProjectionRopeAppend pool", s, act.toString(), err(pool), tolerance(act),
                    ms, "cpu"));
            fused.run();
            double fusedMs = tw.median(fused);
            results.add(new CheckResult("qkvProjectionRopeAppend q, RoPE in the matmul", s, act.toString(),
                    Twin.bitMismatches(tw.gpu.toFloats(q.gpu()), tw.gpu.toFloats(fusedQ)), 0, fusedMs,
                    "gpu, matmul + qkvRopeAppend"));
            results.add(new CheckResult("qkvProjectionRopeAppend pool, RoPE in the matmul", s, act.toString(),
                    Twin.bitMismatches(tw.gpu.toFloats(pool.gpu()), tw.gpu.toFloats(fusedPool)), 0, fusedMs,
                    "gpu, matmul + qkvRopeAppend"));
        } finally {
            fusedPool.close();
            fusedQ.close();
        }
    }

    private void add(DType dt) {
        int n = 100_003;
        Pair a = tw.floats(tw.randomFloats(n, 3f, dt), dt, n);
        Pair b = tw.floats(tw.randomFloats(n, 3f, dt), dt, n);
        Pair out = tw.poisoned(dt, n);
        tw.cpu.ops().add(a.cpu(), b.cpu(), out.cpu());
        check("add", shape(n), out, () -> tw.gpu.ops().add(a.gpu(), b.gpu(), out.gpu()));
    }

    private void siluMul(DType dt) {
        int rows = 6;
        int inter = 14336;
        Pair gu = tw.floats(tw.randomFloats(rows * 2 * inter, 6f, dt), dt, rows, 2 * inter);
        Pair out = tw.poisoned(dt, rows, inter);
        tw.cpu.ops().siluMul(gu.cpu(), out.cpu());
        check("siluMul", shape(rows, inter), out, () -> tw.gpu.ops().siluMul(gu.gpu(), out.gpu()));
    }

    /** Gemma 3 4B's MLP width. */
    private void geluTanhMul(DType dt) {
        int rows = 6;
        int inter = 10240;
        Pair gu = tw.floats(tw.randomFloats(rows * 2 * inter, 6f, dt), dt, rows, 2 * inter);
        Pair out = tw.poisoned(dt, rows, inter);
        tw.cpu.ops().geluTanhMul(gu.cpu(), out.cpu());
        check("geluTanhMul", shape(rows, inter), out, () -> tw.gpu.ops().geluTanhMul(gu.gpu(), out.gpu()));
    }

    /** Gemma's embedding scale on an F32 residual of Gemma 3 4B's width, in place (compared after the first run). */
    private void scaleInPlace(DType dt) {
        int rows = 9;
        int hidden = 2560;
        float factor = (float) Math.sqrt(hidden);
        Pair x = tw.floats(tw.randomFloats(rows * hidden, 2f, dt), dt, rows, hidden);
        tw.cpu.ops().scale(x.cpu(), factor, x.cpu());
        tw.gpu.ops().scale(x.gpu(), factor, x.gpu());
        results.add(new CheckResult("scale in place", shape(rows, hidden), dt.toString(), err(x), tolerance(dt),
                tw.median(() -> tw.gpu.ops().scale(x.gpu(), 1f, x.gpu())), "cpu"));
    }

    /** q/k norm as the forward runs it: [tokens·heads, headDim] normalised in place with an fp32 weight. */
    private void headNormInPlace(DType dt) {
        int rows = 11 * 8;
        int headDim = 256;
        Pair x = tw.floats(tw.randomFloats(rows * headDim, 2f, dt), dt, rows, headDim);
        Pair w = tw.floats(tw.randomFloats(headDim, 1f, DType.F32), DType.F32, headDim);
        tw.cpu.ops().rmsNorm(x.cpu(), null, w.cpu(), 1e-6f, x.cpu());
        tw.gpu.ops().rmsNorm(x.gpu(), null, w.gpu(), 1e-6f, x.gpu());
        results.add(new CheckResult("rmsNorm per head in place", shape(rows, headDim), dt.toString(), err(x),
                tolerance(dt), tw.median(() -> tw.gpu.ops().rmsNorm(x.gpu(), null, w.gpu(), 1e-6f, x.gpu())), "cpu"));
    }

    /** Llama-3-8B widths (32 query, 8 KV heads of 128); all three outputs compared as one. */
    private void splitQkv(DType dt) {
        int rows = 13;
        int qw = 4096;
        int kw = 1024;
        Pair qkv = tw.floats(tw.randomFloats(rows * (qw + 2 * kw), 2f, dt), dt, rows, qw + 2 * kw);
        Pair parts = tw.poisoned(dt, rows * (qw + 2 * kw));
        Tensor[] cpu = {parts.cpu().rows(0, rows * qw), parts.cpu().rows(rows * qw, rows * kw),
            parts.cpu().rows(rows * (qw + kw), rows * kw)};
        Tensor[] gpu = {parts.gpu().rows(0, rows * qw), parts.gpu().rows(rows * qw, rows * kw),
            parts.gpu().rows(rows * (qw + kw), rows * kw)};
        tw.cpu.ops().splitQkv(qkv.cpu(), cpu[0], cpu[1], cpu[2]);
        check("splitQkv", shape(rows, qw + 2 * kw) + "→q,k,v", parts,
                () -> tw.gpu.ops().splitQkv(qkv.gpu(), gpu[0], gpu[1], gpu[2]));
    }

    private void matmul(DType xt, DType wt, int n, int k, int cols, boolean bias) {
        Pair x = tw.floats(tw.randomFloats(n * k, 1f, xt), xt, n, k);
        Pair w = tw.floats(tw.randomFloats(cols * k, 0.1f, wt), wt, cols, k);
        Pair b = bias ? tw.floats(tw.randomFloats(cols, 1f, xt), xt, cols) : null;
        Pair out = tw.poisoned(xt, n, cols);
        tw.cpu.ops().matmul(x.cpu(), w.cpu(), b == null ? null : b.cpu(), out.cpu());
        String op = "matmul" + (bias ? "+bias" : "") + (xt != wt ? " x" + xt + "·w" + wt : "");
        check(op, shape(n, k) + "·" + shape(cols, k) + "ᵀ", out,
                () -> tw.gpu.ops().matmul(x.gpu(), w.gpu(), b == null ? null : b.gpu(), out.gpu()));
    }

    /** bf16 x·wᵀ through the skinny-matmul kernel (enabled up to its largest row count for the check). */
    private void skinnyMatmul(int rows, int cols, int k, DType outType, DType biasType) {
        Pair x = tw.floats(tw.randomFloats(rows * k, 1f, DType.BF16), DType.BF16, rows, k);
        Pair w = tw.floats(tw.randomFloats(cols * k, 0.1f, DType.BF16), DType.BF16, cols, k);
        Pair b = biasType == null ? null : tw.floats(tw.randomFloats(cols, 1f, biasType), biasType, cols);
        Pair out = tw.poisoned(outType, rows, cols);
        tw.cpu.ops().matmul(x.cpu(), w.cpu(), b == null ? null : b.cpu(), out.cpu());
        CudaDevice skinny = tw.gpu.withOptions(
                tw.gpu.options().withSkinnyMatmulRows(KernelOptions.MAX_SKINNY_MATMUL_ROWS));
        check("matmul skinny" + (b == null ? "" : "+bias"), shape(rows, k) + "·" + shape(cols, k) + "ᵀ→" + outType,
                out, () -> skinny.ops().matmul(x.gpu(), w.gpu(), b == null ? null : b.gpu(), out.gpu()));
    }

    private void rope(DType dt, RopeParams params, String variant) {
        int n = 19;
        int qHeads = 8;
        int kHeads = 2;
        int headDim = 128;
        int[] pos = new int[n];
        for (int i = 0; i < n; i++) {
            pos[i] = i == 0 ? 131_000 : tw.rnd.nextInt(40_000);
        }
        Pair q = tw.floats(tw.randomFloats(n * qHeads * headDim, 1f, dt), dt, n, qHeads, headDim);
        Pair k = tw.floats(tw.randomFloats(n * kHeads * headDim, 1f, dt), dt, n, kHeads, headDim);
        Pair p = tw.ints(pos, n);
        tw.cpu.ops().rope(q.cpu(), k.cpu(), p.cpu(), params);
        Runnable gpuOp = () -> tw.gpu.ops().rope(q.gpu(), k.gpu(), p.gpu(), params);
        gpuOp.run();
        double qErr = err(q);
        double kErr = err(k);
        double ms = tw.median(gpuOp);
        String s = shape(n, qHeads, headDim) + "+" + shape(n, kHeads, headDim);
        results.add(new CheckResult("rope " + variant + " q", s, dt.toString(), qErr, tolerance(dt), ms, "cpu"));
        results.add(new CheckResult("rope " + variant + " k", s, dt.toString(), kErr, tolerance(dt), ms, "cpu"));
    }

    private Pair pool(DType dt, int layers, int pages, int pageSize, int kvHeads, int headDim) {
        int n = layers * pages * 2 * pageSize * kvHeads * headDim;
        return tw.floats(tw.randomFloats(n, 1f, dt), dt, layers, pages, 2, pageSize, kvHeads, headDim);
    }

    private void kvAppend(DType dt) {
        int layers = 3;
        int pages = 10;
        int pageSize = 16;
        int kvHeads = 4;
        int headDim = 64;
        Pair pool = pool(dt, layers, pages, pageSize, kvHeads, headDim);
        int n = 21;
        int[] pageIdx = new int[n];
        int[] offs = new int[n];
        for (int i = 0; i < n; i++) {
            int slot = i * 7 % (pages * pageSize); // distinct slots
            pageIdx[i] = slot / pageSize;
            offs[i] = slot % pageSize;
        }
        Pair k = tw.floats(tw.randomFloats(n * kvHeads * headDim, 1f, dt), dt, n, kvHeads, headDim);
        Pair v = tw.floats(tw.randomFloats(n * kvHeads * headDim, 1f, dt), dt, n, kvHeads, headDim);
        Pair pi = tw.ints(pageIdx, n);
        Pair of = tw.ints(offs, n);
        tw.cpu.ops().kvAppend(pool.cpu(), 1, k.cpu(), v.cpu(), pi.cpu(), of.cpu());
        check("kvAppend (whole pool)", shape(layers, pages, 2, pageSize, kvHeads, headDim) + " n=" + n, pool,
                () -> tw.gpu.ops().kvAppend(pool.gpu(), 1, k.gpu(), v.gpu(), pi.gpu(), of.gpu()));
    }

    /** Per appended row: its RoPE position, and the page and offset of its KV slot. */
    private record AppendRows(Pair positions, Pair pages, Pair offsets) {}

    /**
     * {@code n} rows for a rotate-and-append: the first at position 131000, the rest
     * random below 40000; each in a distinct slot of a {@code pages}-page pool.
     */
    private AppendRows appendRows(int n, int pages, int pageSize) {
        int[] pos = new int[n];
        int[] pageIdx = new int[n];
        int[] offs = new int[n];
        for (int i = 0; i < n; i++) {
            pos[i] = i == 0 ? 131_000 : tw.rnd.nextInt(40_000);
            int slot = i * 5 % (pages * pageSize); // distinct slots
            pageIdx[i] = slot / pageSize;
            offs[i] = slot % pageSize;
        }
        return new AppendRows(tw.ints(pos, n), tw.ints(pageIdx, n), tw.ints(offs, n));
    }

    /** Llama-3-8B heads (32 query, 8 KV of 128) with Llama-3.1 RoPE; q and the whole pool compared. */
    private void qkvRopeAppend(DType dt) {
        fusedAppend("qkvRopeAppend", dt, 32, 8, new RopeParams(128, false, 500000.0, 8.0, true, 1.0, 4.0, 8192.0),
                false);
    }

    /**
     * Qwen3-30B-A3B's heads (32 query, 4 KV of 128, RoPE base 1e6) with per-head q and k norms; q and the whole pool
     * compared. bf16 runs the fused kernel, fp32 the unfused sequence it falls back to.
     */
    private void qkNormRopeAppend(DType dt) {
        fusedAppend("qkNormRopeAppend", dt, 32, 4, RopeParams.standard(128, 1000000.0), true);
    }

    /** 13 tokens of heads of 128 through qkvRopeAppend, or with {@code norms} qkNormRopeAppend, on both devices. */
    private void fusedAppend(String op, DType dt, int qHeads, int kvHeads, RopeParams params, boolean norms) {
        int n = 13;
        int headDim = 128;
        int pages = 4;
        int pageSize = 16;
        int width = (qHeads + 2 * kvHeads) * headDim;
        Pair qkv = tw.floats(tw.randomFloats(n * width, 2f, dt), dt, n, width);
        Pair qNorm = norms ? tw.floats(tw.randomFloats(headDim, 1f, dt), dt, headDim) : null;
        Pair kNorm = norms ? tw.floats(tw.randomFloats(headDim, 1f, dt), dt, headDim) : null;
        Pair pool = pool(dt, 2, pages, pageSize, kvHeads, headDim);
        AppendRows rows = appendRows(n, pages, pageSize);
        Pair p = rows.positions();
        Pair pi = rows.pages();
        Pair of = rows.offsets();
        Pair q = tw.poisoned(dt, n, qHeads, headDim);
        float eps = 1e-6f;
        if (norms) {
            tw.cpu.ops().qkNormRopeAppend(qkv.cpu(), qNorm.cpu(), kNorm.cpu(), eps, p.cpu(), params, pool.cpu(), 1,
                    pi.cpu(), of.cpu(), q.cpu());
        } else {
            tw.cpu.ops().qkvRopeAppend(qkv.cpu(), p.cpu(), params, pool.cpu(), 1, pi.cpu(), of.cpu(), q.cpu());
        }
        Runnable gpuOp = norms
                ? () -> tw.gpu.ops().qkNormRopeAppend(qkv.gpu(), qNorm.gpu(), kNorm.gpu(), eps, p.gpu(), params,
                        pool.gpu(), 1, pi.gpu(), of.gpu(), q.gpu())
                : () -> tw.gpu.ops().qkvRopeAppend(qkv.gpu(), p.gpu(), params, pool.gpu(), 1, pi.gpu(), of.gpu(),
                        q.gpu());
        gpuOp.run();
        double qErr = err(q);
        double poolErr = err(pool);
        double ms = tw.median(gpuOp);
        String s = shape(n, width) + " n=" + n + (!norms ? "" : dt == DType.BF16 ? " (fused kernel)" : " (unfused)");
        results.add(new CheckResult(op + " q", s, dt.toString(), qErr, tolerance(dt), ms, "cpu"));
        results.add(new CheckResult(op + " pool", s, dt.toString(), poolErr, tolerance(dt), ms, "cpu"));
    }

    private void gatherRows(DType dt) {
        int rows = 50;
        int width = 333;
        Pair x = tw.floats(tw.randomFloats(rows * width, 1f, dt), dt, rows, width);
        int[] idx = {49, 0, 7, 7, 31, 2};
        Pair r = tw.ints(idx, idx.length);
        Pair out = tw.poisoned(dt, idx.length, width);
        tw.cpu.ops().gatherRows(x.cpu(), r.cpu(), out.cpu());
        check("gatherRows", shape(rows, width) + "→" + idx.length, out,
                () -> tw.gpu.ops().gatherRows(x.gpu(), r.gpu(), out.gpu()));
    }

    /**
     * {@code rows} rows into columns {@code [cols[g], cols[g] + ns[g])} of an output {@code width} wide for each module
     * g (one: {@code addLora}; more: {@code addLoraGroup}, its CPU reference {@code addLora} of each), slots cycling
     * over {@code stack} adapters and none (-1) in runs of {@code run} rows.
     */
    private void addLora(DType dt, int rows, int k, int[] ns, int[] cols, int rank, int stack, int width, int run) {
        Pair x = tw.floats(tw.randomFloats(rows * k, 1f, dt), dt, rows, k);
        List<Pair> a = new ArrayList<>();
        List<Pair> b = new ArrayList<>();
        for (int n : ns) {
            a.add(tw.floats(tw.randomFloats(stack * rank * k, 0.05f, dt), dt, stack, rank, k));
            b.add(tw.floats(tw.randomFloats(stack * n * rank, 0.05f, dt), dt, stack, n, rank));
        }
        float[] scaleValues = new float[stack];
        for (int s = 0; s < stack; s++) {
            scaleValues[s] = 0.5f + s;
        }
        Pair scales = tw.floats(scaleValues, DType.F32, stack);
        int[] slotIds = new int[rows];
        for (int r = 0; r < rows; r++) {
            slotIds[r] = (r / run) % (stack + 1) - 1;
        }
        Pair slots = tw.ints(slotIds, rows);
        Pair out = tw.floats(tw.randomFloats(rows * width, 1f, dt), dt, rows, width);
        for (int g = 0; g < ns.length; g++) {
            tw.cpu.ops().addLora(x.cpu(), a.get(g).cpu(), b.get(g).cpu(), scales.cpu(), slots.cpu(), out.cpu(), cols[g]);
        }
        String op = ns.length == 1 ? "addLora" : "addLoraGroup";
        check(op, shape(rows, k) + " r" + rank + "x" + stack + "→" + Arrays.toString(ns) + "@" + Arrays.toString(cols),
                out, () -> {
                    if (ns.length == 1) {
                        tw.gpu.ops().addLora(x.gpu(), a.get(0).gpu(), b.get(0).gpu(), scales.gpu(), slots.gpu(),
                                out.gpu(), cols[0]);
                    } else {
                        tw.gpu.ops().addLoraGroup(x.gpu(), a.stream().map(Pair::gpu).toList(),
                                b.stream().map(Pair::gpu).toList(), scales.gpu(), slots.gpu(), out.gpu(), cols);
                    }
                });
    }

    private void pages(DType dt) {
        int layers = 2;
        int pages = 12;
        int pageSize = 8;
        int kvHeads = 2;
        int headDim = 64;
        String s = shape(layers, pages, 2, pageSize, kvHeads, headDim);
        Pair pool = pool(dt, layers, pages, pageSize, kvHeads, headDim);
        Pair src = tw.ints(new int[] {3, 0, 9}, 3);
        Pair dst = tw.ints(new int[] {5, 11, 1}, 3);
        tw.cpu.ops().copyPages(pool.cpu(), src.cpu(), dst.cpu());
        check("copyPages (whole pool)", s, pool, () -> tw.gpu.ops().copyPages(pool.gpu(), src.gpu(), dst.gpu()));

        Pair ids = tw.ints(new int[] {7, 2, 10, 4}, 4);
        Pair gathered = tw.poisoned(dt, layers, 4, 2, pageSize, kvHeads, headDim);
        tw.cpu.ops().gatherPages(pool.cpu(), ids.cpu(), gathered.cpu());
        check("gatherPages", s + "→4", gathered, () -> tw.gpu.ops().gatherPages(pool.gpu(), ids.gpu(), gathered.gpu()));

        Pair in = tw.floats(tw.randomFloats(layers * 4 * 2 * pageSize * kvHeads * headDim, 1f, dt), dt, layers, 4, 2,
                pageSize, kvHeads, headDim);
        Pair targets = tw.ints(new int[] {0, 6, 8, 3}, 4);
        tw.cpu.ops().scatterPages(pool.cpu(), targets.cpu(), in.cpu());
        check("scatterPages (whole pool)", "4→" + s, pool,
                () -> tw.gpu.ops().scatterPages(pool.gpu(), targets.gpu(), in.gpu()));
    }

    /** Ties in different chunks of a row (lowest index wins), a maximum in the last element, a row of -inf. */
    private void argmax(int rows) {
        int vocab = 128_256;
        float[] logits = tw.randomFloats(rows * vocab, 10f, DType.F32);
        int r = rows / 3;
        logits[r * vocab + 100] = 50f;
        logits[r * vocab + 90_000] = 50f;
        if (rows > 1) {
            logits[(rows - 1) * vocab + vocab - 1] = 60f;
        }
        if (rows > 2) {
            Arrays.fill(logits, vocab, 2 * vocab, Float.NEGATIVE_INFINITY);
        }
        Pair l = tw.floats(logits, DType.F32, rows, vocab);
        Pair out = tw.poisoned(DType.I32, rows);
        tw.cpu.ops().argmax(l.cpu(), out.cpu());
        Runnable gpuOp = () -> tw.gpu.ops().argmax(l.gpu(), out.gpu());
        gpuOp.run();
        double bad = Twin.mismatches(tw.cpu.toInts(out.cpu()), tw.gpu.toInts(out.gpu()));
        results.add(new CheckResult("argmax", shape(rows, vocab), "I32", bad, 0, tw.median(gpuOp), "cpu"));
    }

    /** A decoder-layer-like sequence captured into a CUDA graph, replayed on new inputs, vs eager ops. */
    private void graphReplay() {
        DType dt = DType.BF16;
        int rows = 4;
        int hidden = 1024;
        Pair w = tw.floats(tw.randomFloats(hidden, 1f, dt), dt, hidden);
        Pair proj = tw.floats(tw.randomFloats(2 * hidden * hidden, 0.05f, dt), dt, 2 * hidden, hidden);
        Tensor x = tw.gpu.allocate(dt, rows, hidden);
        Tensor normed = tw.gpu.allocate(dt, rows, hidden);
        Tensor gateUp = tw.gpu.allocate(dt, rows, 2 * hidden);
        Tensor out = tw.gpu.allocate(dt, rows, hidden);
        Runnable layer = () -> {
            tw.gpu.ops().rmsNorm(x, null, w.gpu(), 1e-6f, normed);
            tw.gpu.ops().matmul(normed, proj.gpu(), null, gateUp);
            tw.gpu.ops().siluMul(gateUp, out);
        };
        try (CudaGraph graph = tw.gpu.capture(layer);
             Tensor input = tw.gpu.fromFloats(tw.randomFloats(rows * hidden, 1f, dt), dt, rows, hidden)) {
            tw.gpu.copy(input, x); // new data after capture: the replay must read it
            Twin.poison(tw.gpu, out);
            graph.replay();
            float[] replayed = tw.gpu.toFloats(out);
            Twin.poison(tw.gpu, out);
            layer.run();
            results.add(new CheckResult("cudaGraph replay vs eager", shape(rows, hidden) + " norm·matmul·silu",
                    dt.toString(), relErr(tw.gpu.toFloats(out), replayed), 0, tw.median(graph::replay), "gpu eager"));
            // programmatic launch is on by default: both edges (norm to skinny matmul, matmul to silu) are converted
            results.add(new CheckResult("cudaGraph programmatic edges (of 2)", shape(rows, hidden) + " norm·matmul·silu",
                    dt.toString(), Math.abs(graph.programmaticEdges() - 2), 0, 0, "count"));
        }
    }
}
