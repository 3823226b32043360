package org.mstar.engine;

import org.mstar.device.Device;
import org.mstar.device.Tensor;

/** The plain double-precision loops the dense reference forwards are written in. */
final class DenseMath {
    private DenseMath() {}

    /** A device tensor's values as doubles; null for null. */
    static double[] read(Device d, Tensor t) {
        if (t == null) {
            return null;
        }
        float[] f = d.toFloats(t);
        double[] out = new double[f.length];
        for (int i = 0; i < f.length; i++) {
            out[i] = f[i];
        }
        return out;
    }

    static double[] rmsNorm(double[] x, double[] w, double eps) {
        double ss = 0;
        for (double v : x) {
            ss += v * v;
        }
        double inv = 1 / Math.sqrt(ss / x.length + eps);
        double[] out = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            out[i] = x[i] * inv * w[i];
        }
        return out;
    }

    /** {@code w [outDim, inDim]} times {@code x}, plus {@code bias} unless null. */
    static double[] linear(double[] x, double[] w, double[] bias, int outDim, int inDim) {
        double[] out = new double[outDim];
        for (int o = 0; o < outDim; o++) {
            double acc = bias == null ? 0 : bias[o];
            for (int i = 0; i < inDim; i++) {
                acc += x[i] * w[o * inDim + i];
            }
            out[o] = acc;
        }
        return out;
    }

    /** {@code x += y}. */
    static void add(double[] x, double[] y) {
        for (int i = 0; i < x.length; i++) {
            x[i] += y[i];
        }
    }

    /** The gated MLP of residual row {@code x}: its RMSNorm through gate/up, SiLU(gate)·up, then down. */
    static double[] gatedMlp(double[] x, double[] norm, double eps, double[] gateUp, double[] down, int inter) {
        int h = x.length;
        double[] gu = linear(rmsNorm(x, norm, eps), gateUp, null, 2 * inter, h);
        return linear(siluMul(gu, inter), down, null, h, inter);
    }

    /** SiLU(gate)·up over {@code gateUp}'s two halves. */
    static double[] siluMul(double[] gateUp, int inter) {
        double[] act = new double[inter];
        for (int e = 0; e < inter; e++) {
            double g = gateUp[e];
            act[e] = g / (1 + Math.exp(-g)) * gateUp[inter + e];
        }
        return act;
    }

    /**
     * One head's attention of query row {@code q} over key and value rows {@code from} to {@code to} (inclusive):
     * scores over {@code qkDim} values ({@code q} from {@code qAt}, keys from {@code kAt}) times {@code scale}, a
     * softmax, and the weighted sum of {@code vDim} values from {@code vAt} added into {@code out} from {@code outAt}.
     */
    static void attend(double[] q, int qAt, double[][] k, int kAt, int qkDim, double[][] v, int vAt, int vDim, int from,
                       int to, double scale, double[] out, int outAt) {
        double[] s = new double[to + 1];
        double max = Double.NEGATIVE_INFINITY;
        for (int j = from; j <= to; j++) {
            double dot = 0;
            for (int e = 0; e < qkDim; e++) {
                dot += q[qAt + e] * k[j][kAt + e];
            }
            s[j] = dot * scale;
            max = Math.max(max, s[j]);
        }
        double sum = 0;
        for (int j = from; j <= to; j++) {
            s[j] = Math.exp(s[j] - max);
            sum += s[j];
        }
        for (int j = from; j <= to; j++) {
            for (int e = 0; e < vDim; e++) {
                out[outAt + e] += s[j] / sum * v[j][vAt + e];
            }
        }
    }
}
