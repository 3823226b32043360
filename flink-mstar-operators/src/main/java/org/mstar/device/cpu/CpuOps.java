package org.mstar.device.cpu;

import org.mstar.device.ComputeOps;
import org.mstar.device.DType;
import org.mstar.device.Fp8Rows;
import org.mstar.device.Fp8Weight;
import org.mstar.device.Mamba2Shape;
import org.mstar.device.MoeRouting;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.Philox;
import org.mstar.device.ProbabilitySampler;
import org.mstar.device.RaggedAttentionPlan;
import org.mstar.device.RingAttentionPlan;
import org.mstar.device.RopeParams;
import org.mstar.device.SamplingBatch;
import org.mstar.device.Tensor;

/**
 * The reference implementation of every op: fp32 arithmetic, rounded once on store. Rows move through
 * {@link FloatRows} so no inner loop dispatches on dtype; the large ops live in their own classes.
 */
final class CpuOps implements ComputeOps, AutoCloseable {
    private final ParallelLoop loop;
    private final CpuLatentAttention latent;

    CpuOps(int threads) {
        this.loop = new ParallelLoop(threads);
        this.latent = new CpuLatentAttention(loop);
    }

    @Override
    public void embedding(Tensor table, Tensor ids, Tensor out) {
        CpuTensor t = CpuTensor.of(table);
        CpuTensor id = CpuTensor.of(ids);
        CpuTensor o = CpuTensor.of(out);
        int vocab = (int) t.dim(0);
        int hidden = (int) t.dim(1);
        requireSize(o, (long) id.size() * hidden, "embedding output");
        for (int i = 0; i < id.size(); i++) {
            int tok = id.getInt(i);
            if (tok < 0 || tok >= vocab) {
                throw new IndexOutOfBoundsException("token id " + tok + " outside vocab " + vocab);
            }
            FloatRows.copy(t, tok * hidden, o, i * hidden, hidden);
        }
    }

    @Override
    public void rmsNorm(Tensor x, Tensor residual, Tensor weight, float eps, Tensor out) {
        CpuTensor xs = CpuTensor.of(x);
        CpuTensor r = residual == null ? null : CpuTensor.of(residual);
        float[] w = FloatRows.readAll(CpuTensor.of(weight));
        int hidden = w.length;
        if (xs.dim(-1) != hidden) {
            throw new IllegalArgumentException("rmsNorm of " + xs + " with a weight of " + hidden);
        }
        int rows = xs.size() / hidden;
        RowOutput o = RowOutput.of(out, hidden, xs.size(), "rmsNorm output");
        if (r != null) {
            requireSize(r, xs.size(), "rmsNorm residual");
        }
        loop.forChunks(rows, hidden * 4L, (from, to) -> {
            float[] v = new float[hidden];
            float[] sum = r == null ? null : new float[hidden];
            for (int row = from; row < to; row++) {
                int base = row * hidden;
                readNormInput(xs, r, base, v, sum);
                float ss = 0f;
                for (int h = 0; h < hidden; h++) {
                    ss += v[h] * v[h];
                }
                float inv = (float) (1.0 / Math.sqrt(ss / hidden + eps));
                for (int h = 0; h < hidden; h++) {
                    v[h] = v[h] * inv * w[h];
                }
                o.write(v, row);
            }
        });
    }

    /**
     * Reads the row at {@code base} of {@code x} into {@code v}; with a residual stream, first adds the row into it
     * and reads back what it stores (rounded to its dtype), which is what the next layer sees and what is normalised.
     */
    private static void readNormInput(CpuTensor x, CpuTensor residual, int base, float[] v, float[] sum) {
        int hidden = v.length;
        FloatRows.read(x, base, v, 0, hidden);
        if (residual != null) {
            FloatRows.read(residual, base, sum, 0, hidden);
            for (int h = 0; h < hidden; h++) {
                sum[h] += v[h];
            }
            FloatRows.write(sum, 0, residual, base, hidden);
            FloatRows.read(residual, base, v, 0, hidden);
        }
    }

    @Override
    public void matmul(Tensor x, Tensor w, Tensor bias, Tensor out) {
        if (w instanceof Fp8Weight f) {
            CpuMatmul.run(loop, fp8Input(x, f), f, bias == null ? null : CpuTensor.of(bias), CpuTensor.of(out));
            return;
        }
        if (x instanceof Fp8Rows) {
            throw new IllegalArgumentException("matmul: FP8 rows " + x + " multiply only an FP8 weight, got " + w);
        }
        CpuMatmul.run(loop, CpuTensor.of(x), CpuTensor.of(w), bias == null ? null : CpuTensor.of(bias), CpuTensor.of(out));
    }

    /** The input a product with {@code w} reads: x itself, or x's rows quantised per token and dequantised (W8A8). */
    private static CpuTensor fp8Input(Tensor x, Fp8Weight w) {
        if (x instanceof Fp8Rows q) {
            if (!w.quantisesActivations()) {
                throw new IllegalArgumentException("matmul: FP8 rows " + x + " multiply only a W8A8 weight, got " + w);
            }
            return CpuTensor.wrap((CpuDevice) q.device(), RowOutput.dequantise(q), q.shape());
        }
        CpuTensor xs = CpuTensor.of(x);
        if (!w.quantisesActivations()) {
            return xs;
        }
        int k = Math.toIntExact(w.dim(1));
        return CpuTensor.wrap((CpuDevice) xs.device(), RowOutput.quantisedRoundTrip(xs, k), new long[] {xs.size() / k, k});
    }

    @Override
    public void quantizeRows(Tensor x, Fp8Rows out) {
        CpuTensor xs = CpuTensor.of(x);
        int k = Math.toIntExact(out.dim(1));
        RowOutput o = RowOutput.of(out, k, xs.size(), "quantizeRows output");
        loop.forChunks(xs.size() / k, k * 4L, (from, to) -> {
            float[] v = new float[k];
            for (int r = from; r < to; r++) {
                FloatRows.read(xs, r * k, v, 0, k);
                o.write(v, r);
            }
        });
    }

    @Override
    public void addLora(Tensor x, Tensor a, Tensor b, Tensor scales, Tensor slots, Tensor out, int outCol) {
        CpuLora.run(loop, CpuTensor.of(x), CpuTensor.of(a), CpuTensor.of(b), CpuTensor.of(scales), CpuTensor.of(slots),
                CpuTensor.of(out), outCol);
    }

    @Override
    public void causalConv1d(Tensor proj, Tensor weight, Tensor bias, Tensor convStates, Tensor slots, Tensor starts,
                             Mamba2Shape shape, Tensor xbc) {
        CpuStateSpace.causalConv1d(loop, CpuTensor.of(proj), CpuTensor.of(weight), bias == null ? null
                : CpuTensor.of(bias), CpuTensor.of(convStates), CpuTensor.of(slots), CpuTensor.of(starts), shape,
                CpuTensor.of(xbc));
    }

    @Override
    public void ssdScan(Tensor xbc, Tensor proj, Tensor aLog, Tensor dtBias, Tensor d, Tensor ssmStates, Tensor slots,
                        Tensor starts, Mamba2Shape shape, Tensor y) {
        CpuStateSpace.ssdScan(loop, CpuTensor.of(xbc), CpuTensor.of(proj), CpuTensor.of(aLog), CpuTensor.of(dtBias),
                CpuTensor.of(d), CpuTensor.of(ssmStates), CpuTensor.of(slots), CpuTensor.of(starts), shape,
                CpuTensor.of(y));
    }

    @Override
    public void ssmStep(Tensor xbc, Tensor proj, Tensor aLog, Tensor dtBias, Tensor d, Tensor ssmStates, Tensor slots,
                        Mamba2Shape shape, Tensor y) {
        CpuStateSpace.ssmStep(loop, CpuTensor.of(xbc), CpuTensor.of(proj), CpuTensor.of(aLog), CpuTensor.of(dtBias),
                CpuTensor.of(d), CpuTensor.of(ssmStates), CpuTensor.of(slots), shape, CpuTensor.of(y));
    }

    @Override
    public void gatedRmsNorm(Tensor y, Tensor gate, Tensor weight, int groups, float eps, Tensor out) {
        CpuStateSpace.gatedRmsNorm(loop, CpuTensor.of(y), CpuTensor.of(gate), CpuTensor.of(weight), groups, eps,
                CpuTensor.of(out));
    }

    @Override
    public void splitQkv(Tensor qkv, Tensor q, Tensor k, Tensor v) {
        CpuTensor x = CpuTensor.of(qkv);
        CpuTensor[] parts = {CpuTensor.of(q), CpuTensor.of(k), CpuTensor.of(v)};
        int n = (int) x.dim(0);
        int[] widths = new int[parts.length];
        long total = 0;
        for (int p = 0; p < parts.length; p++) {
            if (n == 0 ? parts[p].size() != 0 : parts[p].size() % n != 0) {
                throw new IllegalArgumentException("splitQkv: " + parts[p] + " is not " + n + " rows");
            }
            widths[p] = n == 0 ? 0 : parts[p].size() / n;
            total += widths[p];
        }
        requireSize(x, n * total, "splitQkv input");
        for (int r = 0; r < n; r++) {
            int from = (int) (r * total);
            for (int p = 0; p < parts.length; p++) {
                FloatRows.copy(x, from, parts[p], r * widths[p], widths[p]);
                from += widths[p];
            }
        }
    }

    @Override
    public void add(Tensor a, Tensor b, Tensor out) {
        CpuTensor x = CpuTensor.of(a);
        CpuTensor y = CpuTensor.of(b);
        CpuTensor o = CpuTensor.of(out);
        requireSize(x, o.size(), "add operand");
        requireSize(y, o.size(), "add operand");
        int block = 4096;
        float[] u = new float[block];
        float[] v = new float[block];
        for (int from = 0; from < o.size(); from += block) {
            int n = Math.min(block, o.size() - from);
            FloatRows.read(x, from, u, 0, n);
            FloatRows.read(y, from, v, 0, n);
            for (int i = 0; i < n; i++) {
                u[i] += v[i];
            }
            FloatRows.write(u, 0, o, from, n);
        }
    }

    @Override
    public void siluMul(Tensor gateUp, Tensor out) {
        CpuTensor g = CpuTensor.of(gateUp);
        int inter = (int) out.dim(-1);
        int rows = Math.toIntExact(out.numel() / inter);
        requireSize(g, 2L * out.numel(), "siluMul input");
        RowOutput o = RowOutput.of(out, inter, out.numel(), "siluMul output");
        loop.forChunks(rows, inter * 16L, (from, to) -> {
            float[] gu = new float[2 * inter];
            float[] res = new float[inter];
            for (int r = from; r < to; r++) {
                FloatRows.read(g, r * 2 * inter, gu, 0, 2 * inter);
                for (int i = 0; i < inter; i++) {
                    float gate = gu[i];
                    float silu = (float) (gate / (1.0 + Math.exp(-gate)));
                    res[i] = silu * gu[inter + i];
                }
                o.write(res, r);
            }
        });
    }

    @Override
    public void geluTanhMul(Tensor gateUp, Tensor out) {
        CpuTensor g = CpuTensor.of(gateUp);
        CpuTensor o = CpuTensor.of(out);
        int inter = (int) o.dim(-1);
        int rows = o.size() / inter;
        requireSize(g, 2L * o.size(), "geluTanhMul input");
        double k = Math.sqrt(2 / Math.PI);
        loop.forChunks(rows, inter * 16L, (from, to) -> {
            float[] gu = new float[2 * inter];
            float[] res = new float[inter];
            for (int r = from; r < to; r++) {
                FloatRows.read(g, r * 2 * inter, gu, 0, 2 * inter);
                for (int i = 0; i < inter; i++) {
                    double x = gu[i];
                    float gelu = (float) (0.5 * x * (1 + Math.tanh(k * (x + 0.044715 * x * x * x))));
                    res[i] = gelu * gu[inter + i];
                }
                FloatRows.write(res, 0, o, r * inter, inter);
            }
        });
    }

    @Override
    public void scale(Tensor x, float factor, Tensor out) {
        CpuTensor xs = CpuTensor.of(x);
        CpuTensor o = CpuTensor.of(out);
        requireSize(xs, o.size(), "scale input");
        int block = 4096;
        float[] v = new float[block];
        for (int from = 0; from < o.size(); from += block) {
            int n = Math.min(block, o.size() - from);
            FloatRows.read(xs, from, v, 0, n);
            for (int i = 0; i < n; i++) {
                v[i] *= factor;
            }
            FloatRows.write(v, 0, o, from, n);
        }
    }

    // ---- Encoder ops: LayerNorm, exact GELU, conv1d ----

    @Override
    public void layerNorm(Tensor x, Tensor residual, Tensor weight, Tensor bias, float eps, Tensor out) {
        CpuTensor xs = CpuTensor.of(x);
        CpuTensor r = residual == null ? null : CpuTensor.of(residual);
        CpuTensor o = CpuTensor.of(out);
        float[] w = FloatRows.readAll(CpuTensor.of(weight));
        int hidden = w.length;
        float[] b = bias == null ? new float[hidden] : FloatRows.readAll(CpuTensor.of(bias));
        if (xs.dim(-1) != hidden || b.length != hidden) {
            throw new IllegalArgumentException("layerNorm of " + xs + " with a weight of " + hidden + " and a bias of "
                    + b.length);
        }
        int rows = xs.size() / hidden;
        requireSize(o, xs.size(), "layerNorm output");
        if (r != null) {
            requireSize(r, xs.size(), "layerNorm residual");
        }
        loop.forChunks(rows, hidden * 6L, (from, to) -> {
            float[] v = new float[hidden];
            float[] sum = r == null ? null : new float[hidden];
            for (int row = from; row < to; row++) {
                int base = row * hidden;
                readNormInput(xs, r, base, v, sum);
                // mean and sums in double: a row's mean may dwarf its spread, and an fp32 mean would cost the
                // centred values their last digits; two passes, so the variance cannot cancel
                double s = 0;
                for (int h = 0; h < hidden; h++) {
                    s += v[h];
                }
                double mean = s / hidden;
                double ss = 0;
                for (int h = 0; h < hidden; h++) {
                    v[h] = (float) (v[h] - mean);
                    ss += (double) v[h] * v[h];
                }
                float inv = (float) (1.0 / Math.sqrt(ss / hidden + eps));
                for (int h = 0; h < hidden; h++) {
                    v[h] = v[h] * inv * w[h] + b[h];
                }
                FloatRows.write(v, 0, o, base, hidden);
            }
        });
    }

    @Override
    public void gelu(Tensor x, Tensor out) {
        CpuTensor xs = CpuTensor.of(x);
        CpuTensor o = CpuTensor.of(out);
        requireSize(xs, o.size(), "gelu input");
        int block = 4096;
        int blocks = (o.size() + block - 1) / block;
        loop.forChunks(blocks, block * 16L, (first, last) -> {
            float[] v = new float[block];
            for (int bi = first; bi < last; bi++) {
                int from = bi * block;
                int n = Math.min(block, o.size() - from);
                FloatRows.read(xs, from, v, 0, n);
                for (int i = 0; i < n; i++) {
                    v[i] = (float) ExactGelu.gelu(v[i]);
                }
                FloatRows.write(v, 0, o, from, n);
            }
        });
    }

    @Override
    public void conv1d(Tensor x, Tensor weight, Tensor bias, int stride, int padding, Tensor out) {
        CpuConv1d.run(loop, CpuTensor.of(x), CpuTensor.of(weight), bias == null ? null : CpuTensor.of(bias), stride,
                padding, CpuTensor.of(out));
    }

    // ---- end of encoder ops ----

    // ---- Decode fusions ----

    /** The unfused sequence itself: the reference the fused CUDA kernel must match. */
    @Override
    public void gateUpActivation(Tensor x, Tensor gateUpWeight, boolean geluTanh, Tensor gateUp, Tensor out) {
        CpuTensor o = CpuTensor.of(out);
        long inter = o.dim(-1);
        if (gateUpWeight.rank() != 2 || gateUpWeight.dim(0) != 2 * inter || gateUp.dtype() != o.dtype()) {
            throw new IllegalArgumentException("gateUpActivation: weight " + gateUpWeight + " must be [" + 2 * inter
                    + ", K] and gateUp " + gateUp + " of the dtype of out " + o);
        }
        matmul(x, gateUpWeight, null, gateUp);
        if (geluTanh) {
            geluTanhMul(gateUp, o);
        } else {
            siluMul(gateUp, o);
        }
    }

    /** The unfused sequence itself: the reference the fused CUDA kernel must match. */
    @Override
    public void qkvProjectionRopeAppend(Tensor x, Tensor qkvWeight, Tensor qkvBias, Tensor qkv, Tensor posIds,
            RopeParams params, Tensor pool, int layer, Tensor pageIdx, Tensor offsets, Tensor q) {
        matmul(x, qkvWeight, qkvBias, qkv);
        qkvRopeAppend(qkv, posIds, params, pool, layer, pageIdx, offsets, q);
    }

    // ---- end of decode fusions ----

    @Override
    public void moeRoute(Tensor logits, MoeRouting routing, Tensor ids, Tensor weights) {
        CpuMoeRouter.run(loop, CpuTensor.of(logits), routing, CpuTensor.of(ids), CpuTensor.of(weights));
    }

    @Override
    public void moeExperts(Tensor x, Tensor gateUp, Tensor down, Tensor ids, Tensor weights, Tensor out) {
        CpuMoeExperts.run(loop, CpuTensor.of(x), CpuTensor.of(gateUp), CpuTensor.of(down), CpuTensor.of(ids),
                CpuTensor.of(weights), CpuTensor.of(out));
    }

    @Override
    public void moeLocalIds(Tensor ids, int first, int count, Tensor local) {
        CpuTensor in = CpuTensor.of(ids);
        CpuTensor out = CpuTensor.of(local);
        if (in.numel() != out.numel()) {
            throw new IllegalArgumentException("moeLocalIds: " + in.numel() + " ids into " + out.numel());
        }
        for (int i = 0; i < in.numel(); i++) {
            int e = in.getInt(i);
            out.setInt(i, e >= first && e < first + count ? e - first : -1);
        }
    }

    @Override
    public void rope(Tensor q, Tensor k, Tensor posIds, RopeParams params) {
        CpuRope.run(loop, CpuTensor.of(q), k == null ? null : CpuTensor.of(k), CpuTensor.of(posIds), params);
    }

    @Override
    public void kvAppend(Tensor pool, int layer, Tensor k, Tensor v, Tensor pageIdx, Tensor offsets) {
        CpuTensor p = CpuTensor.of(pool);
        CpuTensor ks = CpuTensor.of(k);
        CpuTensor vs = CpuTensor.of(v);
        CpuTensor pages = CpuTensor.of(pageIdx);
        CpuTensor offs = CpuTensor.of(offsets);
        KvPoolGeometry g = new KvPoolGeometry(p);
        if (g.planes() != 2) {
            throw new IllegalArgumentException("kvAppend writes K and V planes; a latent pool " + p + " takes latentAppend");
        }
        int tokenElems = g.tokenElems();
        int n = pages.size();
        requireSize(offs, n, "kvAppend offsets");
        requireSize(ks, (long) n * tokenElems, "kvAppend K");
        requireSize(vs, (long) n * tokenElems, "kvAppend V");
        for (int i = 0; i < n; i++) {
            int page = pages.getInt(i);
            int off = offs.getInt(i);
            FloatRows.copy(ks, i * tokenElems, p, g.slot(layer, page, 0, off), tokenElems);
            FloatRows.copy(vs, i * tokenElems, p, g.slot(layer, page, 1, off), tokenElems);
        }
    }

    /** The unfused sequence itself: the reference the fused CUDA kernel must match. */
    @Override
    public void qkvRopeAppend(Tensor qkv, Tensor posIds, RopeParams params, Tensor pool, int layer, Tensor pageIdx,
            Tensor offsets, Tensor q) {
        splitNormRopeAppend(qkv, null, null, 0f, posIds, params, pool, layer, pageIdx, offsets, q);
    }

    /** The unfused sequence itself: the reference the fused CUDA kernel must match. */
    @Override
    public void qkNormRopeAppend(Tensor qkv, Tensor qNorm, Tensor kNorm, float eps, Tensor posIds, RopeParams params,
            Tensor pool, int layer, Tensor pageIdx, Tensor offsets, Tensor q) {
        splitNormRopeAppend(qkv, qNorm, kNorm, eps, posIds, params, pool, layer, pageIdx, offsets, q);
    }

    /** splitQkv, the per-head q and k norms when given (qNorm null: none), rope, kvAppend. */
    private void splitNormRopeAppend(Tensor qkv, Tensor qNorm, Tensor kNorm, float eps, Tensor posIds,
            RopeParams params, Tensor pool, int layer, Tensor pageIdx, Tensor offsets, Tensor q) {
        CpuTensor x = CpuTensor.of(qkv);
        CpuTensor p = CpuTensor.of(pool);
        long n = x.dim(0);
        long kvHeads = p.dim(4);
        long headDim = p.dim(5);
        CpuTensor k = (CpuTensor) x.device().allocate(x.dtype(), n, kvHeads, headDim);
        CpuTensor v = (CpuTensor) x.device().allocate(x.dtype(), n, kvHeads, headDim);
        splitQkv(x, q, k, v);
        if (qNorm != null) {
            Tensor qRows = q.reshape(q.numel() / headDim, headDim);
            Tensor kRows = k.reshape(n * kvHeads, headDim);
            rmsNorm(qRows, null, qNorm, eps, qRows);
            rmsNorm(kRows, null, kNorm, eps, kRows);
        }
        rope(q, k, posIds, params);
        kvAppend(p, layer, k, v, pageIdx, offsets);
    }

    @Override
    public void pagedAttention(Tensor q, Tensor pool, int layer, PagedAttentionPlan plan, Tensor out) {
        CpuPagedAttention.run(loop, CpuTensor.of(q), CpuTensor.of(pool), layer, plan, CpuTensor.of(out));
    }

    @Override
    public void gatherRows(Tensor x, Tensor rows, Tensor out) {
        CpuTensor xs = CpuTensor.of(x);
        CpuTensor r = CpuTensor.of(rows);
        CpuTensor o = CpuTensor.of(out);
        int n = (int) xs.dim(0);
        int width = n == 0 ? 0 : xs.size() / n;
        requireSize(o, (long) r.size() * width, "gatherRows output");
        for (int j = 0; j < r.size(); j++) {
            int src = r.getInt(j);
            if (src < 0 || src >= n) {
                throw new IndexOutOfBoundsException("row " + src + " outside " + n);
            }
            FloatRows.copy(xs, src * width, o, j * width, width);
        }
    }

    @Override
    public void argmax(Tensor logits, Tensor out) {
        CpuTensor l = CpuTensor.of(logits);
        CpuTensor o = CpuTensor.of(out);
        int vocab = (int) l.dim(-1);
        int rows = l.size() / vocab;
        requireSize(o, rows, "argmax output");
        float[] row = new float[vocab];
        for (int r = 0; r < rows; r++) {
            FloatRows.read(l, r * vocab, row, 0, vocab);
            int best = 0;
            for (int i = 1; i < vocab; i++) {
                if (row[i] > row[best]) {
                    best = i;
                }
            }
            o.setInt(r, best);
        }
    }

    @Override
    public void maskLogits(Tensor logits, Tensor allowed) {
        CpuTensor l = CpuTensor.of(logits);
        CpuTensor a = CpuTensor.of(allowed);
        if (l.dtype() != DType.F32 || a.dtype() != DType.I32) {
            throw new IllegalArgumentException("maskLogits takes F32 logits and I32 allowed bits, got " + l + " and " + a);
        }
        int vocab = (int) l.dim(-1);
        int rows = l.size() / vocab;
        int words = (vocab + 31) >>> 5;
        requireSize(a, rows * words, "maskLogits allowed");
        float[] f = l.f32();
        int[] bits = a.i32();
        for (int r = 0; r < rows; r++) {
            int base = l.offset() + r * vocab;
            int wordBase = a.offset() + r * words;
            for (int v = 0; v < vocab; v++) {
                if ((bits[wordBase + (v >>> 5)] >>> (v & 31) & 1) == 0) {
                    f[base + v] = Float.NEGATIVE_INFINITY;
                }
            }
        }
    }

    @Override
    public void samplingProbs(Tensor logits, SamplingBatch batch, Tensor probs) {
        CpuSamplingPipeline.run(loop, CpuTensor.of(logits), batch, CpuTensor.of(probs));
    }

    @Override
    public void sampleFromProbs(Tensor probs, Tensor seeds, Tensor offsets, Tensor out) {
        CpuTensor p = CpuTensor.of(probs);
        CpuTensor s = CpuTensor.of(seeds);
        CpuTensor off = CpuTensor.of(offsets);
        CpuTensor o = CpuTensor.of(out);
        if (p.dtype() != DType.F32) {
            throw new IllegalArgumentException("probs must be F32, got " + p.dtype());
        }
        int vocab = (int) p.dim(-1);
        int rows = p.size() / vocab;
        requireSize(s, rows, "sampleFromProbs seeds");
        requireSize(off, rows, "sampleFromProbs offsets");
        requireSize(o, rows, "sampleFromProbs output");
        for (int r = 0; r < rows; r++) {
            float u = Philox.uniform(s.getLong(r), off.getLong(r));
            o.setInt(r, ProbabilitySampler.sample(p.f32(), p.offset() + r * vocab, vocab, u));
        }
    }

    @Override
    public void copyPages(Tensor pool, Tensor src, Tensor dst) {
        CpuTensor p = CpuTensor.of(pool);
        CpuTensor s = CpuTensor.of(src);
        CpuTensor d = CpuTensor.of(dst);
        KvPoolGeometry g = new KvPoolGeometry(p);
        requireSize(d, s.size(), "copyPages destinations");
        for (int l = 0; l < g.layers(); l++) {
            for (int i = 0; i < s.size(); i++) {
                FloatRows.copy(p, g.page(l, s.getInt(i)), p, g.page(l, d.getInt(i)), g.pageElems());
            }
        }
    }

    @Override
    public void gatherPages(Tensor pool, Tensor pages, Tensor out) {
        CpuTensor p = CpuTensor.of(pool);
        CpuTensor ids = CpuTensor.of(pages);
        CpuTensor o = CpuTensor.of(out);
        KvPoolGeometry g = new KvPoolGeometry(p);
        int n = ids.size();
        requireSize(o, (long) g.layers() * n * g.pageElems(), "gatherPages output");
        for (int l = 0; l < g.layers(); l++) {
            for (int i = 0; i < n; i++) {
                FloatRows.copy(p, g.page(l, ids.getInt(i)), o, (l * n + i) * g.pageElems(), g.pageElems());
            }
        }
    }

    @Override
    public void scatterPages(Tensor pool, Tensor pages, Tensor in) {
        CpuTensor p = CpuTensor.of(pool);
        CpuTensor ids = CpuTensor.of(pages);
        CpuTensor src = CpuTensor.of(in);
        KvPoolGeometry g = new KvPoolGeometry(p);
        int n = ids.size();
        requireSize(src, (long) g.layers() * n * g.pageElems(), "scatterPages input");
        for (int l = 0; l < g.layers(); l++) {
            for (int i = 0; i < n; i++) {
                FloatRows.copy(src, (l * n + i) * g.pageElems(), p, g.page(l, ids.getInt(i)), g.pageElems());
            }
        }
    }

    // ---------------------------------------------------------------- latent (MLA) attention

    @Override
    public void latentAppend(Tensor kvA, Tensor kvNorm, float eps, Tensor posIds, RopeParams rope, Tensor pool,
                             int layer, Tensor pageIdx, Tensor offsets) {
        latent.append(CpuTensor.of(kvA), CpuTensor.of(kvNorm), eps, CpuTensor.of(posIds), rope, CpuTensor.of(pool), layer,
                CpuTensor.of(pageIdx), CpuTensor.of(offsets));
    }

    @Override
    public void latentQuery(Tensor q, Tensor kvB, Tensor posIds, RopeParams rope, Tensor qLatent) {
        latent.query(CpuTensor.of(q), CpuTensor.of(kvB), CpuTensor.of(posIds), rope, CpuTensor.of(qLatent));
    }

    @Override
    public void latentAttention(Tensor qLatent, Tensor pool, int layer, PagedAttentionPlan plan, Tensor out) {
        latent.attention(CpuTensor.of(qLatent), CpuTensor.of(pool), layer, plan, CpuTensor.of(out));
    }

    @Override
    public void latentValues(Tensor latentOut, Tensor kvB, Tensor out) {
        latent.values(CpuTensor.of(latentOut), CpuTensor.of(kvB), CpuTensor.of(out));
    }

    // ---------------------------------------------------------------- ragged (cacheless) attention

    @Override
    public void raggedAttention(Tensor q, Tensor k, Tensor v, RaggedAttentionPlan plan, Tensor out) {
        CpuRaggedAttention.run(loop, CpuTensor.of(q), CpuTensor.of(k), CpuTensor.of(v), plan, CpuTensor.of(out));
    }

    private static void requireSize(CpuTensor t, long expected, String what) {
        if (t.size() != expected) {
            throw new IllegalArgumentException(what + " " + t + " should hold " + expected + " elements");
        }
    }

    @Override
    public void close() {
        loop.close();
    }

    // ---------------------------------------------------------------- frame streams (ring KV)

    @Override
    public void ringAttention(Tensor q, Tensor ring, RingAttentionPlan plan, Tensor out) {
        CpuRingAttention.run(loop, CpuTensor.of(q), CpuTensor.of(ring), plan, CpuTensor.of(out));
    }

    @Override
    public void ringAppend(Tensor k, Tensor v, Tensor ring, Tensor rows) {
        CpuTensor ks = CpuTensor.of(k);
        CpuTensor vs = CpuTensor.of(v);
        CpuTensor r = CpuTensor.of(ring);
        CpuTensor idx = CpuTensor.of(rows);
        int n = idx.size();
        int width = r.rank() == 4 && r.dim(1) == 2 ? (int) (r.dim(2) * r.dim(3)) : -1;
        if (width < 0 || ks.size() != n * width || vs.size() != n * width) {
            throw new IllegalArgumentException("ringAppend: k " + ks + ", v " + vs + " must be " + n
                    + " rows of a ring buffer's [2, kvHeads, headDim], got " + r);
        }
        for (int i = 0; i < n; i++) {
            int row = idx.getInt(i);
            if (row < 0 || row >= r.dim(0)) {
                throw new IndexOutOfBoundsException("ring row " + row + " outside a buffer of " + r.dim(0));
            }
            FloatRows.copy(ks, i * width, r, row * 2 * width, width);
            FloatRows.copy(vs, i * width, r, (row * 2 + 1) * width, width);
        }
    }
}
