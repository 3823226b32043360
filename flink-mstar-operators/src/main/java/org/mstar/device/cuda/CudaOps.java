package org.mstar.device.cuda;

import static org.mstar.device.cuda.Elementwise.code;
import static org.mstar.device.cuda.Elementwise.poolCode;

import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import org.mstar.device.ComputeOps;
import org.mstar.device.ProjectionOps;
import org.mstar.device.DType;
import org.mstar.device.Fp8Rows;
import org.mstar.device.Fp8Weight;
import org.mstar.device.Mamba2Shape;
import org.mstar.device.MoeRouting;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.RaggedAttentionPlan;
import org.mstar.device.RingAttentionPlan;
import org.mstar.device.RopeParams;
import org.mstar.device.SamplingBatch;
import org.mstar.device.Tensor;
import org.mstar.device.UnsupportedOnDeviceException;

/**
 * {@link ComputeOps} on one GPU: every op validates shapes on the host, then enqueues kernels of the
 * mstar-kernels fatbin (or cuBLAS for matmul) on the device's stream and returns without waiting. No op
 * reads device memory back, so any sequence of ops can be captured into a {@link CudaGraph}.
 */
public final class CudaOps implements ComputeOps {
    private final CudaDevice device;
    private final Elementwise elementwise;
    private final CudaMatmul matmul;
    private final CudaFp8Rows fp8Rows;
    private final CudaFp8Matmul fp8Matmul;
    private final CudaAttention attention;
    private final CudaRaggedAttention raggedAttention;
    private final CudaLatentAttention latentAttention;
    private final RopeTables ropeTables;
    private final CudaMoe moe;
    private final CudaStateSpace stateSpace;

    /** Ops choosing their kernels by {@code device}'s options, with the libraries and tables all its views share. */
    CudaOps(CudaDevice device, SharedOpState shared) {
        this.device = device;
        this.elementwise = new Elementwise(device);
        this.matmul = new CudaMatmul(device, elementwise, shared);
        this.fp8Rows = new CudaFp8Rows(device, elementwise);
        this.fp8Matmul = new CudaFp8Matmul(device, matmul, elementwise, fp8Rows, shared);
        this.attention = new CudaAttention(device);
        this.raggedAttention = new CudaRaggedAttention(device);
        this.ropeTables = shared.ropeTables();
        this.moe = new CudaMoe(device, elementwise, shared);
        this.stateSpace = new CudaStateSpace(device);
        this.latentAttention = new CudaLatentAttention(device, shared);
    }

    private static CudaTensor t(Tensor x, String what) {
        return CudaTensor.of(x, what);
    }

    private static void requireType(CudaTensor x, DType type, String what) {
        if (x.dtype() != type) {
            throw new IllegalArgumentException(what + " must be " + type + ", got " + x);
        }
    }

    private static int rowsOf(CudaTensor x, long width, String what) {
        if (width == 0 || x.numel() % width != 0) {
            throw new IllegalArgumentException(what + " " + x + " is not a whole number of rows of " + width);
        }
        return Math.toIntExact(x.numel() / width);
    }

    /**
     * Steps of up to this many tokens let decode attention start (read its plan) while qkv_rope_append runs. 8B
     * decode on an H200 at 16 rows and 4k keys went 7.18 → 6.63 ms with it and that build's other changes, whose
     * kernels account for 0.06 ms of it (Nsight Compute): the rest is time between kernels. Larger steps did not
     * measurably gain (docs/results/2026-12-03/perf-table.md) and run their attention in several waves of blocks, so they keep the release
     * at exit.
     */
    private static final long RELEASE_ATTENTION_ROWS = 16;
    /** qk_norm_rope_append's block: a warp a q or k head, eight of them looping over a token's heads. */
    private static final int QK_NORM_THREADS = 256;

    /** argmax_rows' block and chunk of a row (kArgmaxThreads and kArgmaxThreads · kArgmaxPerThread in sampling.cu). */
    private static final int ARGMAX_THREADS = 256;
    private static final int ARGMAX_CHUNK = ARGMAX_THREADS * 16;

    /**
     * Longest row rms_norm and layer_norm take: 8 elements in each of 1024 threads' registers (Llama-3-70B's hidden
     * size).
     */
    private static final long MAX_NORM_HIDDEN = 8 * 1024;

    /** A block of up to 1024 threads, one warp at least, about {@code perThread} elements per thread. */
    private static int threadsFor(long elements, int perThread) {
        long warps = (elements / perThread + 31) / 32;
        return (int) Math.max(32, Math.min(1024, warps * 32));
    }

    private Kernel kernel(String name) {
        device.enter();
        return device.kernel(name);
    }

    @Override
    public void requireAttentionHeadDim(int headDim, DType dtype) {
        CudaAttention.requireHeadDim(headDim, dtype);
    }

    /** Which cuBLAS this device multiplies with (loads it): for logs and the GPU harness. */
    public String cublasDescription() {
        device.enter();
        return matmul.describe();
    }

    @Override
    public void embedding(Tensor table, Tensor ids, Tensor out) {
        CudaTensor tb = t(table, "embedding table");
        CudaTensor id = t(ids, "embedding ids");
        CudaTensor o = t(out, "embedding out");
        requireType(id, DType.I32, "embedding ids");
        long hidden = tb.dim(1);
        if (o.numel() != id.numel() * hidden) {
            throw new IllegalArgumentException("embedding: out " + o + " must hold " + id.numel() + "x" + hidden);
        }
        device.enter();
        elementwise.launch("embedding_gather", o.numel(), new KernelArgs().tensor(tb).i32(code(tb)).tensor(id)
                .tensor(o).i32(code(o)).i64(id.numel()).i32((int) hidden).i32((int) tb.dim(0)), "embedding");
    }

    @Override
    public void rmsNorm(Tensor x, Tensor residual, Tensor weight, float eps, Tensor out) {
        CudaTensor xs = t(x, "rmsNorm x");
        CudaTensor r = CudaTensor.ofNullable(residual, "rmsNorm residual");
        CudaTensor w = t(weight, "rmsNorm weight");
        if (out instanceof Fp8Rows q) {
            fp8Rows.rmsNorm(xs, r, w, eps, q);
            return;
        }
        CudaTensor o = t(out, "rmsNorm out");
        long hidden = xs.dim(-1);
        int rows = rowsOf(xs, hidden, "rmsNorm x");
        if (w.numel() != hidden || o.numel() != xs.numel() || (r != null && r.numel() != xs.numel())) {
            throw new IllegalArgumentException("rmsNorm: x " + xs + ", residual " + r + ", weight " + w + ", out " + o
                    + " disagree on [rows, " + hidden + "]");
        }
        if (hidden > MAX_NORM_HIDDEN) {
            throw new IllegalArgumentException("rmsNorm: rows of " + hidden + " elements; the kernel holds at most "
                    + MAX_NORM_HIDDEN + " (kNormPerThread in norm.cu)");
        }
        kernel("rms_norm").launch(device.stream(), rows, 1, 1, threadsFor(hidden, 8), 0, new KernelArgs().tensor(xs)
                .i32(code(xs)).tensor(r).i32(r == null ? 0 : code(r)).tensor(w).i32(code(w)).tensor(o).i32(code(o))
                .i32((int) hidden).f32(eps), "rmsNorm");
    }

    @Override
    public void matmul(Tensor x, Tensor w, Tensor bias, Tensor out) {
        if (w instanceof Fp8Weight f) {
            device.enter();
            fp8Matmul.matmul(x, f, CudaTensor.ofNullable(bias, "matmul bias"), t(out, "matmul out"));
            return;
        }
        device.enter();
        matmul.matmul(t(x, "matmul x"), t(w, "matmul w"), CudaTensor.ofNullable(bias, "matmul bias"), t(out, "matmul out"));
    }

    @Override
    public void quantizeRows(Tensor x, Fp8Rows out) {
        fp8Rows.quantize(t(x, "quantizeRows x"), out, "quantizeRows");
    }

    @Override
    public void splitQkv(Tensor qkv, Tensor q, Tensor k, Tensor v) {
        CudaTensor x = t(qkv, "splitQkv qkv");
        CudaTensor qs = t(q, "splitQkv q");
        CudaTensor ks = t(k, "splitQkv k");
        CudaTensor vs = t(v, "splitQkv v");
        long rows = x.dim(0);
        long qw = widthOf(qs, rows);
        long kw = widthOf(ks, rows);
        long vw = widthOf(vs, rows);
        if (x.numel() != rows * (qw + kw + vw)) {
            throw new IllegalArgumentException("splitQkv: qkv " + x + " must be [" + rows + ", " + (qw + kw + vw) + "]");
        }
        device.enter();
        elementwise.launch("split_qkv", x.numel(), new KernelArgs().tensor(x).i32(code(x)).tensor(qs).i32(code(qs))
                .tensor(ks).i32(code(ks)).tensor(vs).i32(code(vs)).i64(rows).i32((int) qw).i32((int) kw)
                .i32((int) vw), "splitQkv");
    }

    private static long widthOf(CudaTensor part, long rows) {
        if (rows == 0 ? part.numel() != 0 : part.numel() % rows != 0) {
            throw new IllegalArgumentException("splitQkv: " + part + " is not " + rows + " rows");
        }
        return rows == 0 ? 0 : part.numel() / rows;
    }

    @Override
    public void add(Tensor a, Tensor b, Tensor out) {
        CudaTensor x = t(a, "add a");
        CudaTensor y = t(b, "add b");
        CudaTensor o = t(out, "add out");
        if (x.numel() != y.numel() || x.numel() != o.numel()) {
            throw new IllegalArgumentException("add: " + x + " + " + y + " -> " + o + " need equal sizes");
        }
        device.enter();
        elementwise.launch("add_elements", o.numel(), new KernelArgs().tensor(x).i32(code(x)).tensor(y).i32(code(y))
                .tensor(o).i32(code(o)).i64(o.numel()), "add");
    }

    @Override
    public void siluMul(Tensor gateUp, Tensor out) {
        if (out instanceof Fp8Rows q) {
            fp8Rows.siluMul(t(gateUp, "siluMul gateUp"), q);
            return;
        }
        gatedActivation("siluMul", "silu_mul", gateUp, out);
    }

    @Override
    public void geluTanhMul(Tensor gateUp, Tensor out) {
        gatedActivation("geluTanhMul", "gelu_tanh_mul", gateUp, out);
    }

    /** {@code out = act(gate) · up} by elementwise kernel {@code kernel}, gateUp being {@code [rows, 2·inter]}. */
    private void gatedActivation(String op, String kernel, Tensor gateUp, Tensor out) {
        CudaTensor g = t(gateUp, op + " gateUp");
        CudaTensor o = t(out, op + " out");
        long inter = o.dim(-1);
        int rows = rowsOf(o, inter, op + " out");
        if (g.numel() != 2L * rows * inter) {
            throw new IllegalArgumentException(op + ": gateUp " + g + " must be [" + rows + ", " + 2 * inter + "]");
        }
        device.enter();
        elementwise.launch(kernel, o.numel(), new KernelArgs().tensor(g).i32(code(g)).tensor(o).i32(code(o))
                .i64(rows).i32((int) inter), op);
    }

    @Override
    public void scale(Tensor x, float factor, Tensor out) {
        CudaTensor xs = t(x, "scale x");
        CudaTensor o = t(out, "scale out");
        if (xs.numel() != o.numel()) {
            throw new IllegalArgumentException("scale: " + xs + " -> " + o + " need equal sizes");
        }
        device.enter();
        elementwise.launch("scale_elements", o.numel(), new KernelArgs().tensor(xs).i32(code(xs)).tensor(o).i32(code(o))
                .i64(o.numel()).f32(factor), "scale");
    }

    // ---- Encoder ops: LayerNorm, exact GELU, conv1d ----

    @Override
    public void layerNorm(Tensor x, Tensor residual, Tensor weight, Tensor bias, float eps, Tensor out) {
        CudaTensor xs = t(x, "layerNorm x");
        CudaTensor r = CudaTensor.ofNullable(residual, "layerNorm residual");
        CudaTensor w = t(weight, "layerNorm weight");
        CudaTensor b = CudaTensor.ofNullable(bias, "layerNorm bias");
        CudaTensor o = t(out, "layerNorm out");
        long hidden = xs.dim(-1);
        int rows = rowsOf(xs, hidden, "layerNorm x");
        if (w.numel() != hidden || (b != null && b.numel() != hidden) || o.numel() != xs.numel()
                || (r != null && r.numel() != xs.numel())) {
            throw new IllegalArgumentException("layerNorm: x " + xs + ", residual " + r + ", weight " + w + ", bias " + b
                    + ", out " + o + " disagree on [rows, " + hidden + "]");
        }
        if (hidden > MAX_NORM_HIDDEN) {
            throw new IllegalArgumentException("layerNorm: rows of " + hidden + " elements; the kernel holds at most "
                    + MAX_NORM_HIDDEN + " (kLayerNormPerThread in encoder.cu)");
        }
        if (rows == 0) {
            return;
        }
        kernel("layer_norm").launch(device.stream(), rows, 1, 1, threadsFor(hidden, 8), 0, new KernelArgs().tensor(xs)
                .i32(code(xs)).tensor(r).i32(r == null ? 0 : code(r)).tensor(w).i32(code(w)).tensor(b)
                .i32(b == null ? 0 : code(b)).tensor(o).i32(code(o)).i32((int) hidden).f32(eps), "layerNorm");
    }

    @Override
    public void gelu(Tensor x, Tensor out) {
        CudaTensor xs = t(x, "gelu x");
        CudaTensor o = t(out, "gelu out");
        if (xs.numel() != o.numel()) {
            throw new IllegalArgumentException("gelu: " + xs + " -> " + o + " need equal sizes");
        }
        device.enter();
        elementwise.launch("gelu_exact", o.numel(), new KernelArgs().tensor(xs).i32(code(xs)).tensor(o).i32(code(o))
                .i64(o.numel()), "gelu");
    }

    /** im2col into a scratch buffer of x's dtype, then one GEMM against the weight flattened to [out, in·kernel]. */
    @Override
    public void conv1d(Tensor x, Tensor weight, Tensor bias, int stride, int padding, Tensor out) {
        CudaTensor xs = t(x, "conv1d x");
        CudaTensor w = t(weight, "conv1d weight");
        CudaTensor o = t(out, "conv1d out");
        if (xs.rank() != 2 || w.rank() != 3 || w.dim(1) != xs.dim(1)) {
            throw new IllegalArgumentException("conv1d takes x [frames, inChannels] and weight [outChannels, "
                    + "inChannels, kernel], got " + xs + " and " + w);
        }
        int frames = Math.toIntExact(xs.dim(0));
        int channels = Math.toIntExact(xs.dim(1));
        int kernel = Math.toIntExact(w.dim(2));
        long outChannels = w.dim(0);
        int outFrames = ProjectionOps.conv1dOutFrames(frames, kernel, stride, padding);
        if (o.rank() != 2 || o.dim(0) != outFrames || o.dim(1) != outChannels) {
            throw new IllegalArgumentException("conv1d: out " + o + " must be [" + outFrames + ", " + outChannels + "]");
        }
        long width = (long) channels * kernel;
        device.enter();
        CudaTensor cols = device.scratch("conv1d.cols", xs.dtype(), outFrames, width);
        elementwise.launch("conv1d_im2col", outFrames * width, new KernelArgs().tensor(xs).i32(code(xs)).tensor(cols)
                .i32(frames).i32(channels).i32(kernel).i32(stride).i32(padding).i64(outFrames), "conv1d");
        matmul.matmul(cols, (CudaTensor) w.reshape(outChannels, width), CudaTensor.ofNullable(bias, "conv1d bias"), o);
    }

    // ---- end of encoder ops ----

    // ---- Decode fusions ----

    /**
     * At the rows the skinny matmul takes, one launch: its tiles pair 8 gate rows with their 8 up rows and the
     * epilogue applies the activation (gateUp is not written). Otherwise the matmul into gateUp, then the
     * activation kernel. (A CUDA-core GEMV doing both lost to that pair on an H200, docs/architecture/decode-fusions.md: the
     * tensor-core matmul streams the weight faster than the launch it saves; this fusion keeps its weight stream.)
     */
    @Override
    public void gateUpActivation(Tensor x, Tensor gateUpWeight, boolean geluTanh, Tensor gateUp, Tensor out) {
        if (gateUpWeight instanceof Fp8Weight) {
            // the skinny epilogue reads bf16 weights: an FP8 weight takes the matmul, then the activation kernel
            matmul(x, gateUpWeight, null, gateUp);
            gatedActivation(t(gateUp, "gateUpActivation gateUp"), t(out, "gateUpActivation out"), geluTanh);
            return;
        }
        CudaTensor xs = t(x, "gateUpActivation x");
        CudaTensor w = t(gateUpWeight, "gateUpActivation weight");
        CudaTensor gu = t(gateUp, "gateUpActivation gateUp");
        CudaTensor o = t(out, "gateUpActivation out");
        long inter = o.dim(-1);
        if (w.rank() != 2 || w.dim(0) != 2 * inter) {
            throw new IllegalArgumentException("gateUpActivation: weight " + w + " must be [" + 2 * inter
                    + ", K] for out " + o);
        }
        long k = w.dim(1);
        int rows = rowsOf(xs, k, "gateUpActivation x");
        if (o.numel() != rows * inter || gu.numel() != 2L * rows * inter || gu.dtype() != o.dtype()) {
            throw new IllegalArgumentException("gateUpActivation: out " + o + " must be [" + rows + ", " + inter
                    + "] and gateUp " + gu + " [" + rows + ", " + 2 * inter + "] of its dtype");
        }
        if (rows == 0) {
            return;
        }
        device.enter();
        // a few rows: the activation in the skinny matmul's epilogue, gateUp left untouched
        if (matmul.gatedSkinny(xs, w, o, geluTanh ? SkinnyMatmul.Activation.GELU_TANH : SkinnyMatmul.Activation.SILU)) {
            return;
        }
        matmul.matmul(xs, w, null, gu);
        gatedActivation(gu, o, geluTanh);
    }

    /** {@code out[rows, I] = act(gateUp[:, :I]) · gateUp[:, I:]}. */
    private void gatedActivation(CudaTensor gu, CudaTensor o, boolean geluTanh) {
        long inter = o.dim(-1);
        long rows = o.numel() / inter;
        if (gu.numel() != 2 * rows * inter || gu.dtype() != o.dtype()) {
            throw new IllegalArgumentException("gateUpActivation: gateUp " + gu + " must be [" + rows + ", "
                    + 2 * inter + "] of out's dtype, out " + o);
        }
        elementwise.launch(geluTanh ? "gelu_tanh_mul" : "silu_mul", o.numel(), new KernelArgs().tensor(gu)
                .i32(code(gu)).tensor(o).i32(code(o)).i64(rows).i32((int) inter), "gateUpActivation");
    }

    /**
     * The matmul into qkv, then {@link #qkvRopeAppend}; with the device's {@code qkvRopeInMatmul} on, at the rows
     * the skinny matmul takes, one launch whose epilogue rotates and appends (qkv is not written).
     */
    @Override
    public void qkvProjectionRopeAppend(Tensor x, Tensor qkvWeight, Tensor qkvBias, Tensor qkv, Tensor posIds,
            RopeParams params, Tensor pool, int layer, Tensor pageIdx, Tensor offsets, Tensor q) {
        if (qkvWeight instanceof Fp8Weight) {
            // the skinny epilogue reads bf16 weights: an FP8 weight takes the matmul, then qkv_rope_append
            matmul(x, qkvWeight, qkvBias, qkv);
            qkvRopeAppend(qkv, posIds, params, pool, layer, pageIdx, offsets, q);
            return;
        }
        CudaTensor xs = t(x, "qkvProjectionRopeAppend x");
        CudaTensor qkvT = t(qkv, "qkvProjectionRopeAppend qkv");
        CudaTensor w = t(qkvWeight, "qkvProjectionRopeAppend weight");
        CudaTensor b = CudaTensor.ofNullable(qkvBias, "qkvProjectionRopeAppend bias");
        CudaTensor pos = t(posIds, "qkvProjectionRopeAppend posIds");
        CudaTensor p = t(pool, "qkvProjectionRopeAppend pool");
        CudaTensor pages = t(pageIdx, "qkvProjectionRopeAppend pageIdx");
        CudaTensor offs = t(offsets, "qkvProjectionRopeAppend offsets");
        CudaTensor qs = t(q, "qkvProjectionRopeAppend q");
        requireType(pos, DType.I32, "qkvProjectionRopeAppend posIds");
        requireType(pages, DType.I32, "qkvProjectionRopeAppend pageIdx");
        requireType(offs, DType.I32, "qkvProjectionRopeAppend offsets");
        requirePool(p, "qkvProjectionRopeAppend");
        if (w.rank() != 2) {
            throw new IllegalArgumentException("qkvProjectionRopeAppend: weight must be [width, K], got " + w);
        }
        long n = pages.numel();
        long k = w.dim(1);
        int kvHeads = (int) p.dim(4);
        int headDim = (int) p.dim(5);
        if (n == 0) {
            return;
        }
        int qHeads = rowsOf(qs, n * headDim, "qkvProjectionRopeAppend q");
        if (w.dim(0) != (long) (qHeads + 2 * kvHeads) * headDim || xs.numel() != n * k || pos.numel() != n
                || offs.numel() != n || (b != null && b.numel() != w.dim(0)) || qkvT.numel() != n * w.dim(0)) {
            throw new IllegalArgumentException("qkvProjectionRopeAppend: x " + xs + ", weight " + w + ", bias " + b
                    + ", qkv " + qkvT + " disagree with " + n + " tokens of " + qHeads + " q and " + kvHeads
                    + " kv heads of " + headDim);
        }
        if (params.rotaryDim() % 2 != 0 || params.rotaryDim() > headDim || params.rotaryDim() <= 0) {
            throw new IllegalArgumentException("qkvProjectionRopeAppend: rotaryDim " + params.rotaryDim()
                    + " must be even and in (0, " + headDim + "]");
        }
        if (layer < 0 || layer >= p.dim(0)) {
            throw new IllegalArgumentException("qkvProjectionRopeAppend: layer " + layer + " outside pool of " + p.dim(0));
        }
        device.enter();
        // the pair rounds the projection to qkv's dtype: the fused epilogue rounds to bf16
        if (device.options().qkvRopeInMatmul() && qkvT.dtype() == DType.BF16
                && matmul.qkvRopeSkinny(xs, w, b, pos, ropeTables.table(params), params.rotaryDim(),
                        params.interleave(), qs, p, pages, offs, layer, qHeads, kvHeads, headDim,
                        n <= RELEASE_ATTENTION_ROWS)) {
            return;
        }
        matmul.matmul(xs, w, b, qkvT);
        qkvRopeAppend(qkvT, pos, params, p, layer, pages, offs, qs);
    }

    // ---- end of decode fusions ----

    @Override
    public void rope(Tensor q, Tensor k, Tensor posIds, RopeParams params) {
        CudaTensor qs = t(q, "rope q");
        CudaTensor ks = CudaTensor.ofNullable(k, "rope k");
        CudaTensor pos = t(posIds, "rope posIds");
        requireType(pos, DType.I32, "rope posIds");
        long n = pos.numel();
        long headDim = qs.dim(-1);
        if (params.rotaryDim() % 2 != 0 || params.rotaryDim() > headDim || params.rotaryDim() <= 0) {
            throw new IllegalArgumentException("rope: rotaryDim " + params.rotaryDim() + " must be even and in (0, "
                    + headDim + "]");
        }
        int qHeads = rowsOf(qs, n * headDim, "rope q");
        int kHeads = ks == null ? 0 : rowsOf(ks, n * headDim, "rope k");
        device.enter();
        CudaTensor inv = ropeTables.table(params);
        kernel("rope_inplace").launch(device.stream(), Math.toIntExact(n), 1, 1,
                threadsFor((long) Math.max(qHeads, kHeads) * params.rotaryDim() / 2, 2), 0,
                new KernelArgs().tensor(qs).i32(code(qs)).tensor(ks).i32(ks == null ? 0 : code(ks)).tensor(pos)
                        .tensor(inv).i32(qHeads).i32(kHeads).i32((int) headDim).i32(params.rotaryDim())
                        .flag(params.interleave()), "rope");
    }

    /**
     * One kernel ({@code qk_norm_rope_append}: a warp a head, its elements in registers from load to pool) where
     * every tensor is bf16, 16-byte aligned, the head dim a multiple of 8 up to 256 and the rotary span a multiple of
     * 16; otherwise the unfused sequence over scratch k and v.
     */
    @Override
    public void qkNormRopeAppend(Tensor qkv, Tensor qNorm, Tensor kNorm, float eps, Tensor posIds, RopeParams params,
            Tensor pool, int layer, Tensor pageIdx, Tensor offsets, Tensor q) {
        CudaTensor qw = t(qNorm, "qkNormRopeAppend qNorm");
        CudaTensor kw = t(kNorm, "qkNormRopeAppend kNorm");
        FusedAppend a = FusedAppend.of("qkNormRopeAppend", qkv, posIds, params, pool, layer, pageIdx, offsets, q);
        int d = a.headDim();
        if (qw.numel() != d || kw.numel() != d) {
            throw new IllegalArgumentException("qkNormRopeAppend: qNorm " + qw + " and kNorm " + kw + " must hold "
                    + d + " weights, one a head dim");
        }
        if (a.n() == 0) {
            return;
        }
        boolean bf16 = Stream.of(a.qkv(), qw, kw, a.pool(), a.q())
                .allMatch(tensor -> tensor.dtype() == DType.BF16 && tensor.alignedTo(16));
        if (!bf16 || d % 8 != 0 || d > 256 || params.rotaryDim() % 16 != 0) {
            CudaTensor k = device.scratch("qkNormRopeAppend.k", a.qkv().dtype(), a.n(), a.kvHeads(), d);
            CudaTensor v = device.scratch("qkNormRopeAppend.v", a.qkv().dtype(), a.n(), a.kvHeads(), d);
            splitQkv(a.qkv(), a.q(), k, v);
            rmsNorm(a.q().reshape(a.n() * a.qHeads(), d), null, qw, eps, a.q().reshape(a.n() * a.qHeads(), d));
            rmsNorm(k.reshape(a.n() * a.kvHeads(), d), null, kw, eps, k.reshape(a.n() * a.kvHeads(), d));
            rope(a.q(), k, a.pos(), params);
            kvAppend(a.pool(), layer, k, v, a.pages(), a.offsets());
            return;
        }
        device.enter();
        CudaTensor inv = ropeTables.table(params);
        kernel("qk_norm_rope_append").launch(device.stream(), Math.toIntExact(a.n()), 1, 1, QK_NORM_THREADS, 0,
                new KernelArgs().tensor(a.qkv()).tensor(qw).tensor(kw).f32(eps).tensor(a.pos()).tensor(inv)
                        .tensor(a.q()).tensor(a.pool()).tensor(a.pages()).tensor(a.offsets()).i32(layer)
                        .i32((int) a.pool().dim(1)).i32((int) a.pool().dim(3)).i32(a.qHeads()).i32(a.kvHeads()).i32(d)
                        .i32(params.rotaryDim()).flag(params.interleave()).flag(a.n() <= RELEASE_ATTENTION_ROWS),
                "qkNormRopeAppend");
    }

    @Override
    public void kvAppend(Tensor pool, int layer, Tensor k, Tensor v, Tensor pageIdx, Tensor offsets) {
        CudaTensor p = t(pool, "kvAppend pool");
        CudaTensor ks = t(k, "kvAppend k");
        CudaTensor vs = t(v, "kvAppend v");
        CudaTensor pages = t(pageIdx, "kvAppend pageIdx");
        CudaTensor offs = t(offsets, "kvAppend offsets");
        requireType(pages, DType.I32, "kvAppend pageIdx");
        requireType(offs, DType.I32, "kvAppend offsets");
        requirePool(p, "kvAppend");
        long n = pages.numel();
        long tokenElems = p.dim(4) * p.dim(5);
        if (ks.numel() != n * tokenElems || vs.numel() != n * tokenElems || offs.numel() != n) {
            throw new IllegalArgumentException("kvAppend: k " + ks + ", v " + vs + " must be [" + n + ", "
                    + p.dim(4) + ", " + p.dim(5) + "] with " + n + " offsets");
        }
        if (layer < 0 || layer >= p.dim(0)) {
            throw new IllegalArgumentException("kvAppend: layer " + layer + " outside pool of " + p.dim(0));
        }
        kernel("kv_append").launch(device.stream(), Math.toIntExact(n), 1, 1, threadsFor(tokenElems, 4), 0,
                new KernelArgs().tensor(p).i32(poolCode(p)).tensor(ks).i32(code(ks)).tensor(vs).i32(code(vs)).tensor(pages)
                        .tensor(offs).i32(layer).i32((int) p.dim(1)).i32((int) p.dim(3)).i32((int) tokenElems),
                "kvAppend");
    }

    @Override
    public void qkvRopeAppend(Tensor qkv, Tensor posIds, RopeParams params, Tensor pool, int layer, Tensor pageIdx,
            Tensor offsets, Tensor q) {
        FusedAppend a = FusedAppend.of("qkvRopeAppend", qkv, posIds, params, pool, layer, pageIdx, offsets, q);
        if (a.n() == 0) {
            return;
        }
        device.enter();
        CudaTensor inv = ropeTables.table(params);
        // a thread per 8 elements of the token's q, k and v: the bf16 path's unit (the general one loops over pairs)
        int threads = threadsFor((long) (a.qHeads() + 2L * a.kvHeads()) * a.headDim(), 8);
        kernel("qkv_rope_append").launch(device.stream(), Math.toIntExact(a.n()), 1, 1, threads, 0,
                new KernelArgs().tensor(a.qkv()).i32(code(a.qkv())).tensor(a.pos()).tensor(inv).tensor(a.q())
                        .i32(code(a.q())).tensor(a.pool()).i32(poolCode(a.pool())).tensor(a.pages())
                        .tensor(a.offsets()).i32(layer).i32((int) a.pool().dim(1)).i32((int) a.pool().dim(3))
                        .i32(a.qHeads()).i32(a.kvHeads()).i32(a.headDim()).i32(params.rotaryDim())
                        .flag(params.interleave()).flag(a.n() <= RELEASE_ATTENTION_ROWS), "qkvRopeAppend");
    }

    /**
     * The checked operands of an op that splits a fused qkv projection, rotates q and k and appends k and v
     * ({@link #qkvRopeAppend}, {@link #qkNormRopeAppend}): {@code n} tokens, kvHeads and headDim from the pool,
     * qHeads from q (0 when there are no tokens).
     */
    private record FusedAppend(CudaTensor qkv, CudaTensor pos, CudaTensor pool, CudaTensor pages, CudaTensor offsets,
                               CudaTensor q, long n, int qHeads, int kvHeads, int headDim) {
        static FusedAppend of(String op, Tensor qkv, Tensor posIds, RopeParams params, Tensor pool, int layer,
                              Tensor pageIdx, Tensor offsets, Tensor q) {
            CudaTensor x = t(qkv, op + " qkv");
            CudaTensor pos = t(posIds, op + " posIds");
            CudaTensor p = t(pool, op + " pool");
            CudaTensor pages = t(pageIdx, op + " pageIdx");
            CudaTensor offs = t(offsets, op + " offsets");
            CudaTensor qs = t(q, op + " q");
            requireType(pos, DType.I32, op + " posIds");
            requireType(pages, DType.I32, op + " pageIdx");
            requireType(offs, DType.I32, op + " offsets");
            requirePool(p, op);
            long n = pages.numel();
            int kvHeads = (int) p.dim(4);
            int headDim = (int) p.dim(5);
            if (params.rotaryDim() % 2 != 0 || params.rotaryDim() > headDim || params.rotaryDim() <= 0) {
                throw new IllegalArgumentException(op + ": rotaryDim " + params.rotaryDim()
                        + " must be even and in (0, " + headDim + "]");
            }
            if (layer < 0 || layer >= p.dim(0)) {
                throw new IllegalArgumentException(op + ": layer " + layer + " outside pool of " + p.dim(0));
            }
            if (n == 0) {
                return new FusedAppend(x, pos, p, pages, offs, qs, 0, 0, kvHeads, headDim);
            }
            int qHeads = rowsOf(qs, n * headDim, op + " q");
            if (x.numel() != n * (qHeads + 2L * kvHeads) * headDim || pos.numel() != n || offs.numel() != n) {
                throw new IllegalArgumentException(op + ": qkv " + x + " must be [" + n + ", "
                        + (qHeads + 2L * kvHeads) * headDim + "] with " + n + " positions and offsets");
            }
            return new FusedAppend(x, pos, p, pages, offs, qs, n, qHeads, kvHeads, headDim);
        }
    }

    private static void requirePool(CudaTensor p, String op) {
        if (p.rank() != 6 || p.dim(2) != 2) {
            throw new IllegalArgumentException(op + ": pool must be [layers, pages, 2, pageSize, kvHeads, headDim], got " + p);
        }
    }

    /** Page moves copy whole pages, so they take a latent (one-plane) pool as they take an NHD one. */
    private static void requirePagePool(CudaTensor p, String op) {
        if (p.rank() != 6 || p.dim(2) != 1 && p.dim(2) != 2) {
            throw new IllegalArgumentException(op + ": pool must be [layers, pages, 1 or 2, pageSize, kvHeads, headDim], got "
                    + p);
        }
    }

    @Override
    public void pagedAttention(Tensor q, Tensor pool, int layer, PagedAttentionPlan plan, Tensor out) {
        device.enter();
        attention.run(t(q, "pagedAttention q"), t(pool, "pagedAttention pool"), layer, plan, t(out, "pagedAttention out"));
    }

    @Override
    public void gatherRows(Tensor x, Tensor rows, Tensor out) {
        CudaTensor xs = t(x, "gatherRows x");
        CudaTensor r = t(rows, "gatherRows rows");
        CudaTensor o = t(out, "gatherRows out");
        requireType(r, DType.I32, "gatherRows rows");
        long rowBytes = xs.byteSize() / xs.dim(0);
        if (o.dtype() != xs.dtype() || o.byteSize() != r.numel() * rowBytes) {
            throw new IllegalArgumentException("gatherRows: out " + o + " must be " + r.numel() + " rows of " + xs);
        }
        chunkCopy(xs, 0, r, o, 0, null, rowBytes, r.numel(), 1, "gatherRows");
    }

    /** Threads of a lora_shrink and lora_expand block (kLoraThreads in lora.cu). */
    private static final int LORA_THREADS = 256;
    /**
     * Rows up to which a lora_shrink block puts all its warps on one rank: a decode batch has a few rows per adapter,
     * so its dot products of K need the whole GPU; past it (prefill) a block takes eight ranks, eight times fewer
     * blocks to scan their window. The sums are the same either way.
     */
    private static final int LORA_ONE_RANK_ROWS = 256;
    /** Output columns of one lora_expand block (kLoraThreads · kLoraExpandColumns). */
    private static final int LORA_EXPAND_COLUMNS = 1024;

    @Override
    public void addLora(Tensor x, Tensor a, Tensor b, Tensor scales, Tensor slots, Tensor out, int outCol) {
        addLoraGroup(x, List.of(a), List.of(b), scales, slots, out, new int[] {outCol});
    }

    /** One lora_shrink and one lora_expand launch for every module of the group. */
    @Override
    public void addLoraGroup(Tensor x, List<Tensor> a, List<Tensor> b, Tensor scales, Tensor slots, Tensor out,
                             int[] outCols) {
        ProjectionOps.checkLoraGroup(a, b, outCols);
        CudaTensor xs = t(x, "addLora x");
        CudaTensor sc = t(scales, "addLora scales");
        CudaTensor sl = t(slots, "addLora slots");
        CudaTensor o = t(out, "addLora out");
        requireType(sl, DType.I32, "addLora slots");
        requireType(sc, DType.F32, "addLora scales");
        int groups = a.size();
        CudaTensor[] as = new CudaTensor[LORA_GROUP];
        CudaTensor[] bs = new CudaTensor[LORA_GROUP];
        int[] ns = new int[LORA_GROUP];
        int[] cols = new int[LORA_GROUP];
        long rows = sl.numel();
        long width = o.dim(-1);
        for (int g = 0; g < groups; g++) {
            as[g] = t(a.get(g), "addLora a");
            bs[g] = t(b.get(g), "addLora b");
            if (as[g].rank() != 3 || bs[g].rank() != 3 || as[g].dim(0) != bs[g].dim(0) || as[g].dim(1) != bs[g].dim(2)
                    || sc.numel() != as[g].dim(0) || !Arrays.equals(as[g].shape(), as[0].shape())
                    || as[g].dtype() != as[0].dtype() || bs[g].dtype() != bs[0].dtype()) {
                throw new IllegalArgumentException("addLora takes a [S, R, K], b [S, N, R] and scales [S] (one S, R, K "
                        + "and dtype per group), got " + as[g] + ", " + bs[g] + " and " + sc);
            }
            ns[g] = (int) bs[g].dim(1);
            cols[g] = outCols[g];
            if (cols[g] < 0 || cols[g] + ns[g] > width) {
                throw new IllegalArgumentException("addLora into columns [" + cols[g] + ", " + (cols[g] + ns[g])
                        + ") of " + o);
            }
        }
        long k = as[0].dim(2);
        if (xs.numel() != rows * k || o.numel() != rows * width) {
            throw new IllegalArgumentException("addLora of x " + xs + " into " + o + " for " + rows + " rows of slots");
        }
        if (rows == 0) {
            return;
        }
        int stack = (int) as[0].dim(0);
        int rank = (int) as[0].dim(1);
        int ranksPerBlock = rows <= LORA_ONE_RANK_ROWS ? 1 : LORA_THREADS / 32;
        int rankChunks = (rank + ranksPerBlock - 1) / ranksPerBlock;
        int total = Arrays.stream(ns).sum();
        device.enter();
        CudaTensor shrunk = device.scratch("lora.shrink", DType.F32, rows, (long) groups * rank);
        kernel("lora_shrink").launch(device.stream(), Math.toIntExact(rows * groups * rankChunks), 1, 1, LORA_THREADS,
                0, new KernelArgs().tensor(xs).i32(code(xs)).tensor(as[0]).tensor(as[1]).tensor(as[2]).i32(code(as[0]))
                        .i32(groups).tensor(sl).tensor(shrunk).i64(rows).i32(stack).i32(rank).i32((int) k).i32(ranksPerBlock),
                "addLora shrink");
        kernel("lora_expand").launch(device.stream(),
                Math.toIntExact(rows * ((total + LORA_EXPAND_COLUMNS - 1) / LORA_EXPAND_COLUMNS)), 1, 1, LORA_THREADS,
                0, new KernelArgs().tensor(shrunk).tensor(bs[0]).tensor(bs[1]).tensor(bs[2]).i32(code(bs[0]))
                        .i32(ns[0]).i32(ns[1]).i32(ns[2]).i32(cols[0]).i32(cols[1]).i32(cols[2]).i32(groups).tensor(sc)
                        .tensor(sl).tensor(o).i32(code(o)).i64(rows).i32(rank).i32((int) width).i32(stack),
                "addLora expand");
    }

    @Override
    public void moeRoute(Tensor logits, MoeRouting routing, Tensor ids, Tensor weights) {
        moe.route(t(logits, "moeRoute logits"), routing, t(ids, "moeRoute ids"), t(weights, "moeRoute weights"));
    }

    @Override
    public void moeExperts(Tensor x, Tensor gateUp, Tensor down, Tensor ids, Tensor weights, Tensor out) {
        moeExpertsSlice(x, gateUp, down, ids, weights, (int) gateUp.dim(0), out);
    }

    @Override
    public void moeExpertsSlice(Tensor x, Tensor gateUp, Tensor down, Tensor localIds, Tensor weights,
                                int routedExperts, Tensor out) {
        moe.experts(t(x, "moeExperts x"), t(gateUp, "moeExperts gateUp"), t(down, "moeExperts down"),
                t(localIds, "moeExperts ids"), t(weights, "moeExperts weights"), routedExperts,
                t(out, "moeExperts out"));
    }

    @Override
    public void moeLocalIds(Tensor ids, int first, int count, Tensor local) {
        moe.localIds(t(ids, "moeLocalIds ids"), first, count, t(local, "moeLocalIds local"));
    }

    @Override
    public void causalConv1d(Tensor proj, Tensor weight, Tensor bias, Tensor convStates, Tensor slots, Tensor starts,
                             Mamba2Shape shape, Tensor xbc) {
        stateSpace.causalConv1d(t(proj, "causalConv1d proj"), t(weight, "causalConv1d weight"),
                CudaTensor.ofNullable(bias, "causalConv1d bias"), t(convStates, "causalConv1d states"),
                t(slots, "causalConv1d slots"), t(starts, "causalConv1d starts"), shape, t(xbc, "causalConv1d xbc"));
    }

    @Override
    public void ssdScan(Tensor xbc, Tensor proj, Tensor aLog, Tensor dtBias, Tensor d, Tensor ssmStates, Tensor slots,
                        Tensor starts, Mamba2Shape shape, Tensor y) {
        stateSpace.ssdScan(t(xbc, "ssdScan xbc"), t(proj, "ssdScan proj"), t(aLog, "ssdScan aLog"),
                t(dtBias, "ssdScan dtBias"), t(d, "ssdScan d"), t(ssmStates, "ssdScan states"),
                t(slots, "ssdScan slots"), t(starts, "ssdScan starts"), shape, t(y, "ssdScan y"));
    }

    @Override
    public void ssmStep(Tensor xbc, Tensor proj, Tensor aLog, Tensor dtBias, Tensor d, Tensor ssmStates, Tensor slots,
                        Mamba2Shape shape, Tensor y) {
        stateSpace.ssmStep(t(xbc, "ssmStep xbc"), t(proj, "ssmStep proj"), t(aLog, "ssmStep aLog"),
                t(dtBias, "ssmStep dtBias"), t(d, "ssmStep d"), t(ssmStates, "ssmStep states"),
                t(slots, "ssmStep slots"), shape, t(y, "ssmStep y"));
    }

    @Override
    public void gatedRmsNorm(Tensor y, Tensor gate, Tensor weight, int groups, float eps, Tensor out) {
        stateSpace.gatedRmsNorm(t(y, "gatedRmsNorm y"), t(gate, "gatedRmsNorm gate"), t(weight, "gatedRmsNorm weight"),
                groups, eps, t(out, "gatedRmsNorm out"));
    }

    @Override
    public void argmax(Tensor logits, Tensor out) {
        CudaTensor l = t(logits, "argmax logits");
        CudaTensor o = t(out, "argmax out");
        requireType(o, DType.I32, "argmax out");
        long vocab = l.dim(-1);
        int rows = rowsOf(l, vocab, "argmax logits");
        if (o.numel() != rows) {
            throw new IllegalArgumentException("argmax: out " + o + " must have " + rows + " entries");
        }
        int chunks = (int) ((vocab + ARGMAX_CHUNK - 1) / ARGMAX_CHUNK);
        CudaTensor partialValue = device.scratch("argmax.partialValue", DType.F32, (long) rows * chunks);
        CudaTensor partialIndex = device.scratch("argmax.partialIndex", DType.I32, (long) rows * chunks);
        CudaTensor done = device.zeroedScratch("argmax.done", DType.I32, rows);
        kernel("argmax_rows").launch(device.stream(), chunks, rows, 1, ARGMAX_THREADS, 0,
                new KernelArgs().tensor(l).i32(code(l)).tensor(o).i32((int) vocab).tensor(partialValue)
                        .tensor(partialIndex).tensor(done), "argmax");
    }

    @Override
    public void maskLogits(Tensor logits, Tensor allowed) {
        CudaTensor l = t(logits, "maskLogits logits");
        CudaTensor a = t(allowed, "maskLogits allowed");
        requireType(l, DType.F32, "maskLogits logits");
        requireType(a, DType.I32, "maskLogits allowed");
        long vocab = l.dim(-1);
        int rows = rowsOf(l, vocab, "maskLogits logits");
        int words = Math.toIntExact((vocab + 31) / 32);
        if (a.numel() != (long) rows * words) {
            throw new IllegalArgumentException("maskLogits: allowed " + a + " must have " + rows + " x " + words
                    + " entries for logits " + l);
        }
        kernel("mask_logits").launch(device.stream(), Math.toIntExact((vocab + 255) / 256), rows, 1, 256, 0,
                new KernelArgs().tensor(l).tensor(a).i32((int) vocab).i32(words), "maskLogits");
    }

    @Override
    public void samplingProbs(Tensor logits, SamplingBatch batch, Tensor probs) {
        CudaTensor l = t(logits, "samplingProbs logits");
        CudaTensor p = t(probs, "samplingProbs probs");
        requireType(l, DType.F32, "samplingProbs logits");
        requireType(p, DType.F32, "samplingProbs probs");
        long vocab = l.dim(-1);
        int rows = rowsOf(l, vocab, "samplingProbs logits");
        if (rows != batch.rows() || p.numel() != l.numel()) {
            throw new IllegalArgumentException("samplingProbs: logits " + l + ", probs " + p + ", batch of "
                    + batch.rows() + " rows disagree");
        }
        CudaTensor stops = CudaTensor.ofNullable(batch.stopIds(), "stopIds");
        kernel("sampling_probs").launch(device.stream(), rows, 1, 1, 1024, 0, new KernelArgs().tensor(l).tensor(p)
                .i32((int) vocab).tensor(t(batch.temperature(), "temperature"))
                .tensor(CudaTensor.ofNullable(batch.topK(), "topK")).tensor(CudaTensor.ofNullable(batch.topP(), "topP"))
                .tensor(CudaTensor.ofNullable(batch.minP(), "minP"))
                .tensor(CudaTensor.ofNullable(batch.repetitionPenalty(), "repetitionPenalty"))
                .tensor(CudaTensor.ofNullable(batch.penaltyCounts(), "penaltyCounts"))
                .tensor(CudaTensor.ofNullable(batch.topPFirst(), "topPFirst"))
                .tensor(CudaTensor.ofNullable(batch.topPMinKeep(), "topPMinKeep"))
                .tensor(CudaTensor.ofNullable(batch.maskStopIds(), "maskStopIds")).tensor(stops)
                .i32(stops == null ? 0 : Math.toIntExact(stops.numel())).flag(batch.applyFilters()), "samplingProbs");
    }

    @Override
    public void sampleFromProbs(Tensor probs, Tensor seeds, Tensor offsets, Tensor out) {
        CudaTensor p = t(probs, "sampleFromProbs probs");
        CudaTensor s = t(seeds, "sampleFromProbs seeds");
        CudaTensor off = t(offsets, "sampleFromProbs offsets");
        CudaTensor o = t(out, "sampleFromProbs out");
        requireType(p, DType.F32, "sampleFromProbs probs");
        requireType(s, DType.I64, "sampleFromProbs seeds");
        requireType(off, DType.I64, "sampleFromProbs offsets");
        requireType(o, DType.I32, "sampleFromProbs out");
        long vocab = p.dim(-1);
        int rows = rowsOf(p, vocab, "sampleFromProbs probs");
        if (s.numel() != rows || off.numel() != rows || o.numel() != rows) {
            throw new IllegalArgumentException("sampleFromProbs: seeds, offsets and out need " + rows + " entries");
        }
        int blocks = Math.toIntExact((vocab + 255) / 256);
        kernel("sample_from_probs").launch(device.stream(), rows, 1, 1, 256, blocks * 4,
                new KernelArgs().tensor(p).tensor(s).tensor(off).tensor(o).i32((int) vocab), "sampleFromProbs");
    }

    @Override
    public void copyPages(Tensor pool, Tensor src, Tensor dst) {
        CudaTensor p = t(pool, "copyPages pool");
        CudaTensor s = t(src, "copyPages src");
        CudaTensor d = t(dst, "copyPages dst");
        requirePagePool(p, "copyPages");
        requireType(s, DType.I32, "copyPages src");
        requireType(d, DType.I32, "copyPages dst");
        if (s.numel() != d.numel()) {
            throw new IllegalArgumentException("copyPages: " + s.numel() + " sources for " + d.numel() + " destinations");
        }
        long layerBytes = p.byteSize() / p.dim(0);
        chunkCopy(p, layerBytes, s, p, layerBytes, d, layerBytes / p.dim(1), s.numel(), p.dim(0), "copyPages");
    }

    @Override
    public void gatherPages(Tensor pool, Tensor pages, Tensor out) {
        CudaTensor p = t(pool, "gatherPages pool");
        CudaTensor ids = t(pages, "gatherPages pages");
        CudaTensor o = t(out, "gatherPages out");
        requirePagePool(p, "gatherPages");
        requireType(ids, DType.I32, "gatherPages pages");
        long layerBytes = p.byteSize() / p.dim(0);
        long pageBytes = layerBytes / p.dim(1);
        if (o.dtype() != p.dtype() || o.byteSize() != p.dim(0) * ids.numel() * pageBytes) {
            throw new IllegalArgumentException("gatherPages: out " + o + " must hold " + ids.numel() + " pages of every layer of " + p);
        }
        chunkCopy(p, layerBytes, ids, o, ids.numel() * pageBytes, null, pageBytes, ids.numel(), p.dim(0), "gatherPages");
    }

    @Override
    public void scatterPages(Tensor pool, Tensor pages, Tensor in) {
        CudaTensor p = t(pool, "scatterPages pool");
        CudaTensor ids = t(pages, "scatterPages pages");
        CudaTensor src = t(in, "scatterPages in");
        requirePagePool(p, "scatterPages");
        requireType(ids, DType.I32, "scatterPages pages");
        long layerBytes = p.byteSize() / p.dim(0);
        long pageBytes = layerBytes / p.dim(1);
        if (src.dtype() != p.dtype() || src.byteSize() != p.dim(0) * ids.numel() * pageBytes) {
            throw new IllegalArgumentException("scatterPages: in " + src + " must hold " + ids.numel() + " pages of every layer of " + p);
        }
        chunkCopy(src, ids.numel() * pageBytes, null, p, layerBytes, ids, pageBytes, ids.numel(), p.dim(0), "scatterPages");
    }

    private void chunkCopy(CudaTensor src, long srcLayerStride, CudaTensor srcIdx, CudaTensor dst, long dstLayerStride,
                           CudaTensor dstIdx, long chunkBytes, long chunks, long layers, String op) {
        kernel("chunk_copy").launch(device.stream(), Math.toIntExact(chunks), Math.toIntExact(layers), 1,
                threadsFor(chunkBytes / 16, 4), 0, new KernelArgs().tensor(src).i64(srcLayerStride).tensor(srcIdx)
                        .tensor(dst).i64(dstLayerStride).tensor(dstIdx).i64(chunkBytes), op);
    }

    // ---------------------------------------------------------------- latent (MLA) attention

    @Override
    public void latentAppend(Tensor kvA, Tensor kvNorm, float eps, Tensor posIds, RopeParams rope, Tensor pool,
                             int layer, Tensor pageIdx, Tensor offsets) {
        latentAttention.append(t(kvA, "latentAppend kvA"), t(kvNorm, "latentAppend kvNorm"), eps,
                t(posIds, "latentAppend posIds"), rope, t(pool, "latentAppend pool"), layer,
                t(pageIdx, "latentAppend pageIdx"), t(offsets, "latentAppend offsets"));
    }

    @Override
    public void latentQuery(Tensor q, Tensor kvB, Tensor posIds, RopeParams rope, Tensor qLatent) {
        latentAttention.query(t(q, "latentQuery q"), t(kvB, "latentQuery kvB"), t(posIds, "latentQuery posIds"), rope,
                t(qLatent, "latentQuery qLatent"));
    }

    @Override
    public void latentAttention(Tensor qLatent, Tensor pool, int layer, PagedAttentionPlan plan, Tensor out) {
        latentAttention.attention(t(qLatent, "latentAttention q"), t(pool, "latentAttention pool"), layer, plan,
                t(out, "latentAttention out"));
    }

    @Override
    public void latentValues(Tensor latent, Tensor kvB, Tensor out) {
        latentAttention.values(t(latent, "latentValues latent"), t(kvB, "latentValues kvB"), t(out, "latentValues out"));
    }

    // ---------------------------------------------------------------- ragged (cacheless) attention

    @Override
    public void raggedAttention(Tensor q, Tensor k, Tensor v, RaggedAttentionPlan plan, Tensor out) {
        device.enter();
        raggedAttention.run(t(q, "raggedAttention q"), t(k, "raggedAttention k"), t(v, "raggedAttention v"), plan,
                t(out, "raggedAttention out"));
    }

    @Override
    public void requireRaggedAttentionHeadDim(int headDim, DType dtype) {
        CudaRaggedAttention.requireHeadDim(headDim, dtype);
    }

    // ---------------------------------------------------------------- frame streams (ring KV)

    /** Query rows per block of {@code ring_attention}: its kRingWarps. */
    private static final int RING_WARPS = 4;

    @Override
    public void ringAttention(Tensor q, Tensor ring, RingAttentionPlan plan, Tensor out) {
        CudaTensor qs = t(q, "ringAttention q");
        CudaTensor r = t(ring, "ringAttention ring");
        CudaTensor o = t(out, "ringAttention out");
        CudaTensor qoIndptr = t(plan.qoIndptr(), "ringAttention qoIndptr");
        CudaTensor kvIndptr = t(plan.kvIndptr(), "ringAttention kvIndptr");
        CudaTensor kvRows = t(plan.kvRows(), "ringAttention kvRows");
        requireType(qoIndptr, DType.I32, "ringAttention qoIndptr");
        requireType(kvIndptr, DType.I32, "ringAttention kvIndptr");
        requireType(kvRows, DType.I32, "ringAttention kvRows");
        if (r.rank() != 4 || r.dim(1) != 2) {
            throw new IllegalArgumentException("ringAttention: ring buffer must be [rows, 2, kvHeads, headDim], got " + r);
        }
        int kvHeads = (int) r.dim(2);
        int headDim = (int) r.dim(3);
        if (headDim % 32 != 0 || headDim > 256) {
            throw new UnsupportedOnDeviceException("ringAttention runs head dims that are multiples of 32 up to 256, got "
                    + headDim);
        }
        if (qs.rank() != 3 || qs.dim(2) != headDim || qs.dim(1) % kvHeads != 0 || o.numel() != qs.numel()) {
            throw new IllegalArgumentException("ringAttention: q " + qs + ", out " + o + " against " + kvHeads
                    + " KV heads of " + headDim);
        }
        if (qoIndptr.numel() < plan.segments() + 1L || kvIndptr.numel() < plan.segments() + 1L) {
            throw new IllegalArgumentException("ringAttention: index tensors too short for " + plan.segments() + " frames");
        }
        int qoHeads = (int) qs.dim(1);
        int tiles = Math.max(1, (plan.maxQoLen() + RING_WARPS - 1) / RING_WARPS);
        kernel("ring_attention").launch(device.stream(), plan.segments(), qoHeads, tiles, RING_WARPS * 32, 0,
                new KernelArgs().tensor(qs).i32(code(qs)).tensor(r).i32(code(r)).tensor(qoIndptr).tensor(kvIndptr)
                        .tensor(kvRows).tensor(o).i32(code(o)).i32(qoHeads).i32(kvHeads).i32(headDim)
                        .f32(plan.smScale()), "ringAttention");
    }

    @Override
    public void ringAppend(Tensor k, Tensor v, Tensor ring, Tensor rows) {
        CudaTensor ks = t(k, "ringAppend k");
        CudaTensor vs = t(v, "ringAppend v");
        CudaTensor r = t(ring, "ringAppend ring");
        CudaTensor idx = t(rows, "ringAppend rows");
        requireType(idx, DType.I32, "ringAppend rows");
        long width = r.rank() == 4 && r.dim(1) == 2 ? r.dim(2) * r.dim(3) : -1;
        if (width < 0 || ks.numel() != idx.numel() * width || vs.numel() != idx.numel() * width) {
            throw new IllegalArgumentException("ringAppend: k " + ks + ", v " + vs + " must be " + idx.numel()
                    + " rows of a ring buffer's [2, kvHeads, headDim], got " + r);
        }
        device.enter();
        elementwise.launch("ring_append", ks.numel(), new KernelArgs().tensor(ks).i32(code(ks)).tensor(vs).i32(code(vs))
                .tensor(r).i32(code(r)).tensor(idx).i64(idx.numel()).i32((int) width), "ringAppend");
    }
}
