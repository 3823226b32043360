package org.mstar.device.cpu;

import org.mstar.device.DType;
import org.mstar.device.Mamba2Shape;

/**
 * {@link org.mstar.device.StateSpaceOps} on the host. The prefill scan follows transformers' torch path: chunks of
 * {@code chunkSize} tokens counted from the segment's first token, inside a chunk the quadratic (attention-like)
 * form over the cumulative log-decay, across chunks the state. Segments and heads are independent and run in
 * parallel; each one's sums run in index order, so a segment's result does not depend on the others of the call.
 */
final class CpuStateSpace {
    private CpuStateSpace() {}

    static void causalConv1d(ParallelLoop loop, CpuTensor proj, CpuTensor weight, CpuTensor bias, CpuTensor states,
                             CpuTensor slots, CpuTensor starts, Mamba2Shape s, CpuTensor xbc) {
        int conv = s.convDim();
        int k = s.convKernel();
        int width = s.projWidth();
        int segments = checkSegments(slots, starts, proj, width, states, "causalConv1d");
        if (weight.size() != conv * k || (bias != null && bias.size() != conv) || xbc.size() != starts.getInt(segments)
                * conv || states.size() / states.dim(0) != (long) conv * (k - 1)) {
            throw new IllegalArgumentException("causalConv1d: weight " + weight + ", bias " + bias + ", states "
                    + states + " and xbc " + xbc + " do not fit " + s);
        }
        float[] w = FloatRows.readAll(weight);
        float[] b = bias == null ? new float[conv] : FloatRows.readAll(bias);
        loop.forEach(segments, (long) conv * k * 4, i -> {
            int from = starts.getInt(i);
            int to = starts.getInt(i + 1);
            int stateBase = slots.getInt(i) * conv * (k - 1);
            float[] window = new float[conv * (k - 1)];
            FloatRows.read(states, stateBase, window, 0, window.length);
            float[] in = new float[conv];
            float[] out = new float[conv];
            for (int t = from; t < to; t++) {
                FloatRows.read(proj, t * width + s.xbcColumn(), in, 0, conv);
                for (int c = 0; c < conv; c++) {
                    float acc = b[c];
                    for (int j = 0; j < k - 1; j++) {
                        acc += w[c * k + j] * window[c * (k - 1) + j];
                    }
                    acc += w[c * k + k - 1] * in[c];
                    out[c] = silu(acc);
                    System.arraycopy(window, c * (k - 1) + 1, window, c * (k - 1), k - 2);
                    window[c * (k - 1) + k - 2] = in[c];
                }
                FloatRows.write(out, 0, xbc, t * conv, conv);
            }
            FloatRows.write(window, 0, states, stateBase, window.length);
        });
    }

    static void ssdScan(ParallelLoop loop, CpuTensor xbc, CpuTensor proj, CpuTensor aLog, CpuTensor dtBias,
                        CpuTensor d, CpuTensor states, CpuTensor slots, CpuTensor starts, Mamba2Shape s, CpuTensor y) {
        int segments = checkSegments(slots, starts, proj, s.projWidth(), states, "ssdScan");
        Params p = Params.of(xbc, aLog, dtBias, d, states, y, starts.getInt(segments), s, "ssdScan");
        int heads = s.heads();
        loop.forEach(segments * heads, (long) s.headDim() * s.stateDim() * s.chunkSize(), job -> {
            int i = job / heads;
            Head h = new Head(p, proj, xbc, job % heads, slots.getInt(i));
            for (int c = starts.getInt(i); c < starts.getInt(i + 1); c += s.chunkSize()) {
                h.chunk(c, Math.min(s.chunkSize(), starts.getInt(i + 1) - c), y);
            }
            h.store();
        });
    }

    static void ssmStep(ParallelLoop loop, CpuTensor xbc, CpuTensor proj, CpuTensor aLog, CpuTensor dtBias,
                        CpuTensor d, CpuTensor states, CpuTensor slots, Mamba2Shape s, CpuTensor y) {
        int rows = slots.size();
        requireI32(slots, "ssmStep slots");
        Params p = Params.of(xbc, aLog, dtBias, d, states, y, rows, s, "ssmStep");
        if (proj.size() != rows * s.projWidth()) {
            throw new IllegalArgumentException("ssmStep: proj " + proj + " is not " + rows + " rows of " + s);
        }
        int heads = s.heads();
        int dim = s.headDim();
        int n = s.stateDim();
        loop.forEach(rows * heads, (long) dim * n * 3, job -> {
            int row = job / heads;
            Head h = new Head(p, proj, xbc, job % heads, slots.getInt(row));
            float dt = h.dt(row);
            float decay = (float) Math.exp(dt * h.a);
            float[] x = h.read(xbc, row * s.convDim() + h.head * dim, dim);
            float[] b = h.read(xbc, row * s.convDim() + h.bColumn, n);
            float[] c = h.read(xbc, row * s.convDim() + h.bColumn + s.groupStates(), n);
            float[] out = new float[dim];
            for (int q = 0; q < dim; q++) {
                float acc = 0f;
                for (int m = 0; m < n; m++) {
                    int e = q * n + m;
                    h.state[e] = h.state[e] * decay + dt * b[m] * x[q];
                    acc += h.state[e] * c[m];
                }
                out[q] = acc + h.skip * x[q];
            }
            FloatRows.write(out, 0, y, row * s.inner() + h.head * dim, dim);
            h.store();
        });
    }

    static void gatedRmsNorm(ParallelLoop loop, CpuTensor y, CpuTensor gate, CpuTensor weight, int groups, float eps,
                             CpuTensor out) {
        int inner = (int) y.dim(-1);
        int rows = y.size() / inner;
        int gateWidth = (int) gate.dim(-1);
        if (groups < 1 || inner % groups != 0 || weight.size() != inner || out.size() != y.size()
                || gate.size() != rows * gateWidth || gateWidth < inner) {
            throw new IllegalArgumentException("gatedRmsNorm of y " + y + " gated by " + gate + " in " + groups
                    + " groups, weight " + weight + ", out " + out);
        }
        float[] w = FloatRows.readAll(weight);
        int size = inner / groups;
        loop.forChunks(rows, inner * 6L, (from, to) -> {
            float[] v = new float[inner];
            float[] z = new float[inner];
            for (int row = from; row < to; row++) {
                FloatRows.read(y, row * inner, v, 0, inner);
                FloatRows.read(gate, row * gateWidth, z, 0, inner);
                for (int g = 0; g < groups; g++) {
                    float ss = 0f;
                    for (int e = g * size; e < (g + 1) * size; e++) {
                        v[e] *= silu(z[e]);
                        ss += v[e] * v[e];
                    }
                    float inv = (float) (1.0 / Math.sqrt(ss / size + eps));
                    for (int e = g * size; e < (g + 1) * size; e++) {
                        v[e] = v[e] * inv * w[e];
                    }
                }
                FloatRows.write(v, 0, out, row * inner, inner);
            }
        });
    }

    static float silu(float x) {
        return (float) (x / (1.0 + Math.exp(-x)));
    }

    static float softplus(float x) {
        // torch's softplus: linear above 20, where log1p(exp(x)) equals x in fp32
        return x > 20f ? x : (float) Math.log1p(Math.exp(x));
    }

    private static int checkSegments(CpuTensor slots, CpuTensor starts, CpuTensor proj, int width, CpuTensor states,
                                     String op) {
        requireI32(slots, op + " slots");
        requireI32(starts, op + " starts");
        int segments = slots.size();
        if (starts.size() != segments + 1 || starts.getInt(0) != 0) {
            throw new IllegalArgumentException(op + ": starts " + starts + " must be [" + (segments + 1)
                    + "] from 0");
        }
        for (int i = 0; i < segments; i++) {
            if (starts.getInt(i + 1) < starts.getInt(i)) {
                throw new IllegalArgumentException(op + ": starts decrease at segment " + i);
            }
            if (slots.getInt(i) < 0 || slots.getInt(i) >= states.dim(0)) {
                throw new IndexOutOfBoundsException(op + ": slot " + slots.getInt(i) + " of segment " + i
                        + " outside the " + states.dim(0) + " state slots");
            }
        }
        if (proj.size() != (long) starts.getInt(segments) * width) {
            throw new IllegalArgumentException(op + ": proj " + proj + " is not " + starts.getInt(segments)
                    + " rows of " + width);
        }
        return segments;
    }

    private static void requireI32(CpuTensor t, String what) {
        if (t.dtype() != DType.I32) {
            throw new IllegalArgumentException(what + " must be I32, got " + t);
        }
    }

    /** The per-head parameters and tensors of one scan or step call, checked against the shape. */
    private record Params(Mamba2Shape s, CpuTensor states, float[] a, float[] dtBias, float[] d) {
        static Params of(CpuTensor xbc, CpuTensor aLog, CpuTensor dtBias, CpuTensor d, CpuTensor states, CpuTensor y,
                         int tokens, Mamba2Shape s, String op) {
            int heads = s.heads();
            if (aLog.size() != heads || dtBias.size() != heads || d.size() != heads
                    || xbc.size() != tokens * s.convDim() || y.size() != tokens * s.inner()
                    || states.size() / states.dim(0) != (long) heads * s.headDim() * s.stateDim()) {
                throw new IllegalArgumentException(op + ": xbc " + xbc + ", aLog " + aLog + ", dtBias " + dtBias
                        + ", d " + d + ", states " + states + ", y " + y + " do not fit " + tokens + " tokens of " + s);
            }
            float[] a = FloatRows.readAll(aLog);
            for (int h = 0; h < heads; h++) {
                a[h] = (float) -Math.exp(a[h]);
            }
            return new Params(s, states, a, FloatRows.readAll(dtBias), FloatRows.readAll(d));
        }
    }

    /** One head of one segment: its state in fp32 while the call runs, written back by {@link #store}. */
    private static final class Head {
        final Mamba2Shape s;
        final CpuTensor proj;
        final CpuTensor xbc;
        final CpuTensor states;
        final int head;
        final int stateBase;
        final int bColumn;
        final float a;
        final float bias;
        final float skip;
        final float[] state;

        Head(Params p, CpuTensor proj, CpuTensor xbc, int head, int slot) {
            this.s = p.s();
            this.proj = proj;
            this.xbc = xbc;
            this.states = p.states();
            this.head = head;
            this.stateBase = (slot * s.heads() + head) * s.headDim() * s.stateDim();
            this.bColumn = s.inner() + head / s.headsPerGroup() * s.stateDim();
            this.a = p.a()[head];
            this.bias = p.dtBias()[head];
            this.skip = p.d()[head];
            this.state = new float[s.headDim() * s.stateDim()];
            FloatRows.read(states, stateBase, state, 0, state.length);
        }

        /** Token {@code t}'s step size: {@code clamp(softplus(dt + dtBias), dtMin, dtMax)}. */
        float dt(int t) {
            float raw = proj.getFloat(t * s.projWidth() + s.dtColumn() + head);
            return Math.min(Math.max(softplus(raw + bias), s.dtMin()), s.dtMax());
        }

        float[] read(CpuTensor t, int from, int n) {
            float[] v = new float[n];
            FloatRows.read(t, from, v, 0, n);
            return v;
        }

        /** Tokens {@code [t0, t0 + len)}: their outputs into y, the state advanced past them. */
        void chunk(int t0, int len, CpuTensor y) {
            int dim = s.headDim();
            int n = s.stateDim();
            int conv = s.convDim();
            float[] dt = new float[len];
            float[] cum = new float[len];
            float[][] x = new float[len][];
            float[][] b = new float[len][];
            float[][] c = new float[len][];
            float sum = 0f;
            for (int i = 0; i < len; i++) {
                dt[i] = dt(t0 + i);
                sum += a * dt[i];
                cum[i] = sum;
                x[i] = read(xbc, (t0 + i) * conv + head * dim, dim);
                b[i] = read(xbc, (t0 + i) * conv + bColumn, n);
                c[i] = read(xbc, (t0 + i) * conv + bColumn + s.groupStates(), n);
            }
            float[] out = new float[dim];
            for (int t = 0; t < len; t++) {
                float carried = (float) Math.exp(cum[t]);
                for (int q = 0; q < dim; q++) {
                    float acc = 0f;
                    for (int m = 0; m < n; m++) {
                        acc += c[t][m] * state[q * n + m];
                    }
                    out[q] = carried * acc;
                }
                for (int u = 0; u <= t; u++) {
                    float cb = 0f;
                    for (int m = 0; m < n; m++) {
                        cb += c[t][m] * b[u][m];
                    }
                    float weight = cb * (float) Math.exp(cum[t] - cum[u]) * dt[u];
                    for (int q = 0; q < dim; q++) {
                        out[q] += weight * x[u][q];
                    }
                }
                for (int q = 0; q < dim; q++) {
                    out[q] += skip * x[t][q];
                }
                FloatRows.write(out, 0, y, (t0 + t) * s.inner() + head * dim, dim);
            }
            float last = cum[len - 1];
            float carried = (float) Math.exp(last);
            for (int e = 0; e < state.length; e++) {
                state[e] *= carried;
            }
            for (int u = 0; u < len; u++) {
                float weight = (float) Math.exp(last - cum[u]) * dt[u];
                for (int q = 0; q < dim; q++) {
                    float wx = weight * x[u][q];
                    for (int m = 0; m < n; m++) {
                        state[q * n + m] += wx * b[u][m];
                    }
                }
            }
        }

        void store() {
            FloatRows.write(state, 0, states, stateBase, state.length);
        }
    }
}
