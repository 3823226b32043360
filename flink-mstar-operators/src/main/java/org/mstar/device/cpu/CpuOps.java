package org.mstar.device.cpu;

import org.mstar.device.ComputeOps;
import org.mstar.device.DType;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.Philox;
import org.mstar.device.ProbabilitySampler;
import org.mstar.device.RopeParams;
import org.mstar.device.SamplingBatch;
import org.mstar.device.Tensor;

/** The reference implementation of every op, written to be read: plain loops, fp32 accumulation. */
final class CpuOps implements ComputeOps, AutoCloseable {
    private final CpuDevice device;
    private final ParallelLoop loop;

    CpuOps(CpuDevice device, int threads) {
        this.device = device;
        this.loop = new ParallelLoop(threads);
    }

    @Override
    public void embedding(Tensor table, Tensor ids, Tensor out) {
        CpuTensor t = CpuTensor.of(table);
        CpuTensor id = CpuTensor.of(ids);
        CpuTensor o = CpuTensor.of(out);
        int hidden = (int) t.dim(1);
        int vocab = (int) t.dim(0);
        for (int i = 0; i < id.size(); i++) {
            int tok = id.getInt(i);
            if (tok < 0 || tok >= vocab) {
                throw new IndexOutOfBoundsException("token id " + tok + " outside vocab " + vocab);
            }
            for (int h = 0; h < hidden; h++) {
                o.setFloat(i * hidden + h, t.getFloat(tok * hidden + h));
            }
        }
    }

    @Override
    public void rmsNorm(Tensor x, Tensor residual, Tensor weight, float eps, Tensor out) {
        CpuTensor xs = CpuTensor.of(x);
        CpuTensor r = residual == null ? null : CpuTensor.of(residual);
        CpuTensor w = CpuTensor.of(weight);
        CpuTensor o = CpuTensor.of(out);
        int hidden = (int) xs.dim(-1);
        int rows = xs.size() / hidden;
        loop.forEach(rows, hidden, row -> {
            int base = row * hidden;
            float[] v = new float[hidden];
            for (int h = 0; h < hidden; h++) {
                float a = xs.getFloat(base + h);
                if (r != null) {
                    r.setFloat(base + h, r.getFloat(base + h) + a);
                    a = r.getFloat(base + h); // normalise what the residual stream stores
                }
                v[h] = a;
            }
            float ss = 0f;
            for (float a : v) {
                ss += a * a;
            }
            float inv = (float) (1.0 / Math.sqrt(ss / hidden + eps));
            for (int h = 0; h < hidden; h++) {
                o.setFloat(base + h, v[h] * inv * w.getFloat(h));
            }
        });
    }

    @Override
    public void matmul(Tensor x, Tensor w, Tensor bias, Tensor out) {
        CpuTensor xs = CpuTensor.of(x);
        CpuTensor ws = CpuTensor.of(w);
        CpuTensor b = bias == null ? null : CpuTensor.of(bias);
        CpuTensor o = CpuTensor.of(out);
        int k = (int) ws.dim(1);
        int n = (int) ws.dim(0);
        int m = xs.size() / k;
        float[] xf = xs.toFloatArray();
        loop.forEach(n, (long) m * k, col -> {
            float[] wrow = new float[k];
            for (int i = 0; i < k; i++) {
                wrow[i] = ws.getFloat(col * k + i);
            }
            float bv = b == null ? 0f : b.getFloat(col);
            for (int row = 0; row < m; row++) {
                float acc = 0f;
                int xb = row * k;
                for (int i = 0; i < k; i++) {
                    acc += xf[xb + i] * wrow[i];
                }
                o.setFloat(row * n + col, acc + bv);
            }
        });
    }

    @Override
    public void add(Tensor a, Tensor b, Tensor out) {
        CpuTensor x = CpuTensor.of(a);
        CpuTensor y = CpuTensor.of(b);
        CpuTensor o = CpuTensor.of(out);
        for (int i = 0; i < o.size(); i++) {
            o.setFloat(i, x.getFloat(i) + y.getFloat(i));
        }
    }

    @Override
    public void siluMul(Tensor gateUp, Tensor out) {
        CpuTensor g = CpuTensor.of(gateUp);
        CpuTensor o = CpuTensor.of(out);
        int inter = (int) o.dim(-1);
        int rows = o.size() / inter;
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < inter; i++) {
                float gate = g.getFloat(r * 2 * inter + i);
                float up = g.getFloat(r * 2 * inter + inter + i);
                float silu = (float) (gate / (1.0 + Math.exp(-gate)));
                o.setFloat(r * inter + i, silu * up);
            }
        }
    }

    @Override
    public void rope(Tensor q, Tensor k, Tensor posIds, RopeParams params) {
        throw new UnsupportedOperationException("rope: CPU implementation not landed yet");
    }

    @Override
    public void kvAppend(Tensor pool, int layer, Tensor k, Tensor v, Tensor pageIdx, Tensor offsets) {
        CpuTensor p = CpuTensor.of(pool);
        CpuTensor ks = CpuTensor.of(k);
        CpuTensor vs = CpuTensor.of(v);
        CpuTensor pages = CpuTensor.of(pageIdx);
        CpuTensor offs = CpuTensor.of(offsets);
        KvPoolGeometry g = new KvPoolGeometry(p);
        int tokenElems = g.tokenElems();
        for (int i = 0; i < pages.size(); i++) {
            int page = pages.getInt(i);
            int off = offs.getInt(i);
            g.checkSlot(page, off);
            int kBase = g.slot(layer, page, 0, off);
            int vBase = g.slot(layer, page, 1, off);
            for (int e = 0; e < tokenElems; e++) {
                p.setFloat(kBase + e, ks.getFloat(i * tokenElems + e));
                p.setFloat(vBase + e, vs.getFloat(i * tokenElems + e));
            }
        }
    }

    @Override
    public void pagedAttention(Tensor q, Tensor pool, int layer, PagedAttentionPlan plan, Tensor out) {
        throw new UnsupportedOperationException("pagedAttention: CPU implementation not landed yet");
    }

    @Override
    public void gatherRows(Tensor x, Tensor rows, Tensor out) {
        CpuTensor xs = CpuTensor.of(x);
        CpuTensor r = CpuTensor.of(rows);
        CpuTensor o = CpuTensor.of(out);
        int width = xs.size() / (int) xs.dim(0);
        for (int j = 0; j < r.size(); j++) {
            int src = r.getInt(j);
            for (int e = 0; e < width; e++) {
                o.setFloat(j * width + e, xs.getFloat(src * width + e));
            }
        }
    }

    @Override
    public void argmax(Tensor logits, Tensor out) {
        CpuTensor l = CpuTensor.of(logits);
        CpuTensor o = CpuTensor.of(out);
        int vocab = (int) l.dim(-1);
        int rows = l.size() / vocab;
        for (int r = 0; r < rows; r++) {
            int best = 0;
            float bestV = l.getFloat(r * vocab);
            for (int i = 1; i < vocab; i++) {
                float v = l.getFloat(r * vocab + i);
                if (v > bestV) {
                    bestV = v;
                    best = i;
                }
            }
            o.setInt(r, best);
        }
    }

    @Override
    public void samplingProbs(Tensor logits, SamplingBatch batch, Tensor probs) {
        throw new UnsupportedOperationException("samplingProbs: CPU implementation not landed yet");
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
        for (int l = 0; l < g.layers(); l++) {
            for (int i = 0; i < s.size(); i++) {
                System.arraycopy(p.storage(), g.page(l, s.getInt(i)), p.storage(), g.page(l, d.getInt(i)), g.pageElems());
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
        for (int l = 0; l < g.layers(); l++) {
            for (int i = 0; i < n; i++) {
                System.arraycopy(p.storage(), g.page(l, ids.getInt(i)), o.storage(),
                        o.offset() + (l * n + i) * g.pageElems(), g.pageElems());
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
        for (int l = 0; l < g.layers(); l++) {
            for (int i = 0; i < n; i++) {
                System.arraycopy(src.storage(), src.offset() + (l * n + i) * g.pageElems(), p.storage(),
                        g.page(l, ids.getInt(i)), g.pageElems());
            }
        }
    }

    @Override
    public void close() {
        loop.close();
    }
}
