package org.mstar.device.cpu;

import java.util.Arrays;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.RopeParams;

/**
 * The reference of {@link org.mstar.device.LatentAttentionOps}: fp32 arithmetic, rounded once on store. RoPE is
 * {@link CpuRope}'s and attention is {@link CpuPagedAttention}'s, run over the latent pool as one shared key-value head
 * (a one-plane pool reads its rows as both keys and values); only the latent part of its output is kept.
 */
final class CpuLatentAttention {
    private final ParallelLoop loop;

    CpuLatentAttention(ParallelLoop loop) {
        this.loop = loop;
    }

    void append(CpuTensor kvA, CpuTensor kvNorm, float eps, CpuTensor posIds, RopeParams rope, CpuTensor pool,
                int layer, CpuTensor pageIdx, CpuTensor offsets) {
        KvPoolGeometry g = new KvPoolGeometry(pool);
        float[] w = FloatRows.readAll(kvNorm);
        int r = w.length;
        int width = g.tokenElems();
        int dr = width - r;
        int n = pageIdx.size();
        if (g.planes() != 1 || dr != rope.rotaryDim() || kvA.size() != (long) n * width || offsets.size() != n) {
            throw new IllegalArgumentException("latentAppend of kvA " + kvA + " (norm of " + r + ", RoPE of "
                    + rope.rotaryDim() + ") into a latent pool of " + width + " for " + n + " tokens");
        }
        CpuTensor kPe = (CpuTensor) kvA.device().allocate(kvA.dtype(), n, 1, dr);
        float[] row = new float[width];
        float[] pe = new float[dr];
        for (int i = 0; i < n; i++) {
            FloatRows.read(kvA, i * width + r, pe, 0, dr);
            FloatRows.write(pe, 0, kPe, i * dr, dr);
        }
        CpuRope.run(loop, kPe, noHeads(kPe), posIds, rope);
        for (int i = 0; i < n; i++) {
            FloatRows.read(kvA, i * width, row, 0, r);
            float ss = 0f;
            for (int c = 0; c < r; c++) {
                ss += row[c] * row[c];
            }
            float inv = (float) (1.0 / Math.sqrt(ss / r + eps));
            for (int c = 0; c < r; c++) {
                row[c] = row[c] * inv * w[c];
            }
            FloatRows.read(kPe, i * dr, row, r, dr);
            FloatRows.write(row, 0, pool, g.slot(layer, pageIdx.getInt(i), 0, offsets.getInt(i)), width);
        }
        kPe.close();
    }

    void query(CpuTensor q, CpuTensor kvB, CpuTensor posIds, RopeParams rope, CpuTensor qLatent) {
        int n = (int) q.dim(0);
        int heads = (int) q.dim(1);
        int r = (int) kvB.dim(2);
        int dr = (int) qLatent.dim(2) - r;
        int dn = (int) q.dim(2) - dr;
        if (q.rank() != 3 || qLatent.rank() != 3 || kvB.rank() != 3 || kvB.dim(0) != heads || kvB.dim(1) <= dn
                || qLatent.dim(0) != n || qLatent.dim(1) != heads || dr != rope.rotaryDim() || dn <= 0) {
            throw new IllegalArgumentException("latentQuery of q " + q + " with kv_b " + kvB + " into " + qLatent
                    + " (RoPE of " + rope.rotaryDim() + ")");
        }
        int kvBRows = (int) kvB.dim(1);
        CpuTensor qPe = (CpuTensor) q.device().allocate(q.dtype(), n, heads, dr);
        float[] head = new float[dn + dr];
        for (int t = 0; t < n * heads; t++) {
            FloatRows.read(q, t * (dn + dr), head, 0, dn + dr);
            FloatRows.write(head, dn, qPe, t * dr, dr);
        }
        CpuRope.run(loop, qPe, noHeads(qPe), posIds, rope);
        loop.forChunks(n * heads, (long) dn * r, (from, to) -> {
            float[] nope = new float[dn];
            float[] wRow = new float[r];
            float[] out = new float[r + dr];
            for (int t = from; t < to; t++) {
                int h = t % heads;
                FloatRows.read(q, t * (dn + dr), nope, 0, dn);
                Arrays.fill(out, 0, r, 0f);
                for (int d = 0; d < dn; d++) {
                    FloatRows.read(kvB, (h * kvBRows + d) * r, wRow, 0, r);
                    for (int c = 0; c < r; c++) {
                        out[c] += nope[d] * wRow[c];
                    }
                }
                FloatRows.read(qPe, t * dr, out, r, dr);
                FloatRows.write(out, 0, qLatent, t * (r + dr), r + dr);
            }
        });
        qPe.close();
    }

    void attention(CpuTensor qLatent, CpuTensor pool, int layer, PagedAttentionPlan plan, CpuTensor out) {
        KvPoolGeometry g = new KvPoolGeometry(pool);
        int width = g.tokenElems();
        int rows = (int) qLatent.dim(0);
        int heads = (int) qLatent.dim(1);
        int r = (int) out.dim(-1);
        if (g.planes() != 1 || qLatent.rank() != 3 || qLatent.dim(2) != width || out.size() != (long) rows * heads * r) {
            throw new IllegalArgumentException("latentAttention of " + qLatent + " into " + out + " over a latent pool of "
                    + width);
        }
        CpuTensor whole = (CpuTensor) out.device().allocate(out.dtype(), rows, heads, width);
        CpuPagedAttention.run(loop, qLatent, pool, layer, plan, whole);
        float[] row = new float[r];
        for (int t = 0; t < rows * heads; t++) {
            FloatRows.read(whole, t * width, row, 0, r);
            FloatRows.write(row, 0, out, t * r, r);
        }
        whole.close();
    }

    void values(CpuTensor latent, CpuTensor kvB, CpuTensor out) {
        int n = (int) latent.dim(0);
        int heads = (int) latent.dim(1);
        int r = (int) latent.dim(2);
        int dv = (int) out.dim(-1);
        int kvBRows = (int) kvB.dim(1);
        int dn = kvBRows - dv;
        if (latent.rank() != 3 || kvB.rank() != 3 || kvB.dim(0) != heads || kvB.dim(2) != r || dn < 0
                || out.size() != (long) n * heads * dv) {
            throw new IllegalArgumentException("latentValues of " + latent + " with kv_b " + kvB + " into " + out);
        }
        loop.forChunks(n * heads, (long) dv * r, (from, to) -> {
            float[] x = new float[r];
            float[] wRow = new float[r];
            float[] o = new float[dv];
            for (int t = from; t < to; t++) {
                int h = t % heads;
                FloatRows.read(latent, t * r, x, 0, r);
                for (int v = 0; v < dv; v++) {
                    FloatRows.read(kvB, (h * kvBRows + dn + v) * r, wRow, 0, r);
                    float acc = 0f;
                    for (int c = 0; c < r; c++) {
                        acc += x[c] * wRow[c];
                    }
                    o[v] = acc;
                }
                FloatRows.write(o, 0, out, t * dv, dv);
            }
        });
    }

    /** A tensor of no heads beside {@code t [n, heads, d]}: RoPE of one tensor alone. */
    private static CpuTensor noHeads(CpuTensor t) {
        return (CpuTensor) t.device().allocate(t.dtype(), t.dim(0), 0, t.dim(2));
    }
}
