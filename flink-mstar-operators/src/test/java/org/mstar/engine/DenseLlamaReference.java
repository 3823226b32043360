package org.mstar.engine;

import static org.mstar.engine.DenseMath.add;
import static org.mstar.engine.DenseMath.attend;
import static org.mstar.engine.DenseMath.gatedMlp;
import static org.mstar.engine.DenseMath.linear;
import static org.mstar.engine.DenseMath.read;
import static org.mstar.engine.DenseMath.rmsNorm;

import org.mstar.device.Device;
import org.mstar.device.RopeParams;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.LlamaLayerWeights;
import org.mstar.model.llama.LlamaWeights;

/**
 * An independent, dense, unbatched, unpaged Llama forward in double precision: the oracle the engine's
 * logits are compared with. Plain loops straight from the architecture's definition; it shares nothing
 * with the engine but the weights.
 */
final class DenseLlamaReference {
    private final ModelConfig c;
    private final double[] embedding;
    private final double[] finalNorm;
    private final double[] lmHead;
    private final Layer[] layers;

    private record Layer(double[] inputNorm, double[] qkv, double[] qkvBias, double[] o, double[] postNorm,
                         double[] gateUp, double[] down) {}

    DenseLlamaReference(LlamaWeights w) {
        this.c = w.config();
        Device d = w.device();
        this.embedding = read(d, w.embedding());
        this.finalNorm = read(d, w.finalNorm());
        this.lmHead = read(d, w.lmHead());
        this.layers = new Layer[c.numLayers()];
        for (int l = 0; l < layers.length; l++) {
            LlamaLayerWeights lw = w.layer(l);
            layers[l] = new Layer(read(d, lw.inputNorm()), read(d, lw.qkvWeight()),
                    lw.qkvBias() == null ? null : read(d, lw.qkvBias()), read(d, lw.oWeight()),
                    read(d, lw.postAttentionNorm()), read(d, lw.gateUpWeight()), read(d, lw.downWeight()));
        }
    }

    /** Logits after the last token of {@code tokens}. */
    double[] lastLogits(int[] tokens) {
        int t = tokens.length;
        int h = c.hiddenSize();
        int d = c.headDim();
        int hq = c.numHeads();
        int hk = c.numKvHeads();
        int qs = c.qSize();
        int ks = c.kvSize();
        double[][] x = new double[t][];
        for (int i = 0; i < t; i++) {
            x[i] = java.util.Arrays.copyOfRange(embedding, tokens[i] * h, (tokens[i] + 1) * h);
        }
        RopeParams rope = c.ropeParams();
        for (int l = 0; l < layers.length; l++) {
            Layer w = layers[l];
            double[][] q = new double[t][];
            double[][] k = new double[t][];
            double[][] v = new double[t][];
            // q, k and v of every position come from the layer's input before any position is updated
            for (int i = 0; i < t; i++) {
                double[] n = rmsNorm(x[i], w.inputNorm(), c.rmsNormEps());
                double[] qkv = linear(n, w.qkv(), w.qkvBias(), qs + 2 * ks, h);
                q[i] = java.util.Arrays.copyOfRange(qkv, 0, qs);
                k[i] = java.util.Arrays.copyOfRange(qkv, qs, qs + ks);
                v[i] = java.util.Arrays.copyOfRange(qkv, qs + ks, qs + 2 * ks);
                rotate(q[i], hq, i, rope);
                rotate(k[i], hk, i, rope);
            }
            int window = c.attentionWindow(l);
            double scale = 1.0 / Math.sqrt(d);
            for (int i = 0; i < t; i++) {
                double[] attn = new double[qs];
                for (int head = 0; head < hq; head++) {
                    int kvHead = head / (hq / hk);
                    int from = window > 0 ? Math.max(0, i - window + 1) : 0;
                    attend(q[i], head * d, k, kvHead * d, d, v, kvHead * d, d, from, i, scale, attn, head * d);
                }
                add(x[i], linear(attn, w.o(), null, h, qs));
                add(x[i], gatedMlp(x[i], w.postNorm(), c.rmsNormEps(), w.gateUp(), w.down(), c.intermediateSize()));
            }
        }
        double[] last = rmsNorm(x[t - 1], finalNorm, c.rmsNormEps());
        return linear(last, lmHead, null, c.vocabSize(), h);
    }

    private void rotate(double[] vec, int heads, int pos, RopeParams p) {
        int d = c.headDim();
        int rot = p.rotaryDim();
        for (int head = 0; head < heads; head++) {
            for (int i = 0; i < rot / 2; i++) {
                double angle = pos * p.invFreq(i);
                int a = head * d + (p.interleave() ? 2 * i : i);
                int b = head * d + (p.interleave() ? 2 * i + 1 : i + rot / 2);
                double x0 = vec[a];
                double x1 = vec[b];
                vec[a] = x0 * Math.cos(angle) - x1 * Math.sin(angle);
                vec[b] = x1 * Math.cos(angle) + x0 * Math.sin(angle);
            }
        }
    }
}
