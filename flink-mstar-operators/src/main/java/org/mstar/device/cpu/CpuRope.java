package org.mstar.device.cpu;

import org.mstar.device.RopeParams;

/**
 * Rotary embedding in place on {@code q [n, qHeads, headDim]} and {@code k [n, kHeads, headDim]}.
 * Pair i uses the fp32-rounded {@link RopeParams#invFreq}; its angle is {@code pos · invFreq} as an fp32
 * product, and cos/sin of that fp32 angle are taken in double and rounded to fp32. The rotation is fp32
 * and rounded once on store; only the first {@code rotaryDim} dims of a head are written.
 */
final class CpuRope {
    private final float[] invFreq;
    private final int rotaryDim;
    private final boolean interleave;

    private CpuRope(RopeParams params, int headDim) {
        int dim = params.rotaryDim();
        if (dim <= 0 || dim % 2 != 0 || dim > headDim) {
            throw new IllegalArgumentException("rotaryDim " + dim + " must be even and within headDim " + headDim);
        }
        this.rotaryDim = dim;
        this.interleave = params.interleave();
        this.invFreq = new float[dim / 2];
        for (int i = 0; i < invFreq.length; i++) {
            invFreq[i] = (float) params.invFreq(i);
        }
    }

    static void run(ParallelLoop loop, CpuTensor q, CpuTensor k, CpuTensor posIds, RopeParams params) {
        if (q.rank() != 3 || k != null && (k.rank() != 3 || q.dim(0) != k.dim(0) || q.dim(2) != k.dim(2))) {
            throw new IllegalArgumentException("rope needs q [n, qHeads, headDim] and k [n, kHeads, headDim], got "
                    + q + " and " + k);
        }
        int n = (int) q.dim(0);
        if (posIds.size() < n) {
            throw new IllegalArgumentException(posIds.size() + " position ids for " + n + " tokens");
        }
        int headDim = (int) q.dim(2);
        int qHeads = (int) q.dim(1);
        int kHeads = k == null ? 0 : (int) k.dim(1);
        CpuRope rope = new CpuRope(params, headDim);
        loop.forChunks(n, (long) (qHeads + kHeads) * rope.rotaryDim * 8, (from, to) -> {
            int half = rope.rotaryDim / 2;
            float[] cos = new float[half];
            float[] sin = new float[half];
            float[] head = new float[rope.rotaryDim];
            for (int t = from; t < to; t++) {
                int pos = posIds.getInt(t);
                for (int i = 0; i < half; i++) {
                    float angle = pos * rope.invFreq[i];
                    cos[i] = (float) Math.cos(angle);
                    sin[i] = (float) Math.sin(angle);
                }
                rope.rotateHeads(q, t, qHeads, headDim, cos, sin, head);
                if (k != null) {
                    rope.rotateHeads(k, t, kHeads, headDim, cos, sin, head);
                }
            }
        });
    }

    private void rotateHeads(CpuTensor x, int token, int heads, int headDim, float[] cos, float[] sin, float[] head) {
        int half = rotaryDim / 2;
        for (int h = 0; h < heads; h++) {
            int base = (token * heads + h) * headDim;
            FloatRows.read(x, base, head, 0, rotaryDim);
            for (int i = 0; i < half; i++) {
                // NeoX pairs dim i with i + half; GPT-J pairs neighbours 2i, 2i+1
                int a = interleave ? 2 * i : i;
                int b = interleave ? 2 * i + 1 : i + half;
                float x1 = head[a];
                float x2 = head[b];
                head[a] = x1 * cos[i] - x2 * sin[i];
                head[b] = x2 * cos[i] + x1 * sin[i];
            }
            FloatRows.write(head, 0, x, base, rotaryDim);
        }
    }
}
