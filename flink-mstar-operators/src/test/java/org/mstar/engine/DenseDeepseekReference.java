package org.mstar.engine;

import static org.mstar.engine.DenseMath.add;
import static org.mstar.engine.DenseMath.attend;
import static org.mstar.engine.DenseMath.gatedMlp;
import static org.mstar.engine.DenseMath.linear;
import static org.mstar.engine.DenseMath.read;
import static org.mstar.engine.DenseMath.rmsNorm;

import java.util.Arrays;
import org.mstar.device.Device;
import org.mstar.device.RopeParams;
import org.mstar.model.LatentAttention;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.LatentAttentionWeights;
import org.mstar.model.llama.LlamaLayerWeights;
import org.mstar.model.llama.LlamaWeights;

/**
 * An independent, dense, unbatched, unpaged DeepSeek-V2 forward (every layer dense) in double precision, written as
 * transformers' DeepseekV2Attention computes it: per-head keys and values decompressed from the normalised latent by
 * kv_b_proj, the rope part of query and key rotated in neighbouring pairs, scores over the whole query head. It shares
 * nothing with the engine but the weights, so the engine's absorbed, latent-space attention is checked against the
 * textbook form.
 */
final class DenseDeepseekReference {
    /** DeepseekV2RMSNorm's default, kept by q_a_layernorm and kv_a_layernorm. */
    private static final double LATENT_EPS = 1e-6;

    private final ModelConfig c;
    private final LatentAttention m;
    private final double[] embedding;
    private final double[] finalNorm;
    private final double[] lmHead;
    private final Layer[] layers;

    private record Layer(double[] inputNorm, double[] qProj, double[] qAProj, double[] qANorm, double[] qBProj,
                         double[] kvAProj, double[] kvANorm, double[] kvBProj, double[] oProj, double[] postNorm,
                         double[] gateUp, double[] down) {}

    DenseDeepseekReference(LlamaWeights w) {
        this.c = w.config();
        this.m = c.latentAttention().orElseThrow();
        Device d = w.device();
        this.embedding = read(d, w.embedding());
        this.finalNorm = read(d, w.finalNorm());
        this.lmHead = read(d, w.lmHead());
        this.layers = new Layer[c.numLayers()];
        for (int l = 0; l < layers.length; l++) {
            LlamaLayerWeights lw = w.layer(l);
            LatentAttentionWeights a = lw.latentAttention();
            layers[l] = new Layer(read(d, lw.inputNorm()), read(d, a.qProj()), read(d, a.qAProj()),
                    read(d, a.qANorm()), read(d, a.qBProj()), read(d, a.kvAProj()), read(d, a.kvANorm()),
                    read(d, a.kvBProj()), read(d, a.oProj()), read(d, lw.postAttentionNorm()),
                    read(d, lw.gateUpWeight()), read(d, lw.downWeight()));
        }
    }

    /** Logits after the last token of {@code tokens}. */
    double[] lastLogits(int[] tokens) {
        int t = tokens.length;
        int h = c.hiddenSize();
        int heads = c.numHeads();
        int dn = m.qkNopeHeadDim();
        int dr = m.qkRopeHeadDim();
        int dv = m.vHeadDim();
        int qk = dn + dr;
        int r = m.kvLoraRank();
        double[][] x = new double[t][];
        for (int i = 0; i < t; i++) {
            x[i] = Arrays.copyOfRange(embedding, tokens[i] * h, (tokens[i] + 1) * h);
        }
        RopeParams rope = c.ropeParams();
        double scale = 1.0 / Math.sqrt(qk);
        for (Layer w : layers) {
            double[][] q = new double[t][];
            double[][] k = new double[t][];
            double[][] v = new double[t][];
            for (int i = 0; i < t; i++) {
                double[] n = rmsNorm(x[i], w.inputNorm(), c.rmsNormEps());
                q[i] = w.qProj() != null ? linear(n, w.qProj(), null, heads * qk, h)
                        : linear(rmsNorm(linear(n, w.qAProj(), null, m.qLoraRank(), h), w.qANorm(), LATENT_EPS),
                                w.qBProj(), null, heads * qk, m.qLoraRank());
                double[] kvA = linear(n, w.kvAProj(), null, r + dr, h);
                double[] latent = rmsNorm(Arrays.copyOf(kvA, r), w.kvANorm(), LATENT_EPS);
                double[] kPe = Arrays.copyOfRange(kvA, r, r + dr);
                rotate(kPe, 0, i, rope);
                double[] kv = linear(latent, w.kvBProj(), null, heads * (dn + dv), r);
                k[i] = new double[heads * qk];
                v[i] = new double[heads * dv];
                for (int head = 0; head < heads; head++) {
                    rotate(q[i], head * qk + dn, i, rope);
                    System.arraycopy(kv, head * (dn + dv), k[i], head * qk, dn);
                    System.arraycopy(kPe, 0, k[i], head * qk + dn, dr);
                    System.arraycopy(kv, head * (dn + dv) + dn, v[i], head * dv, dv);
                }
            }
            for (int i = 0; i < t; i++) {
                double[] attn = new double[heads * dv];
                for (int head = 0; head < heads; head++) {
                    attend(q[i], head * qk, k, head * qk, qk, v, head * dv, dv, 0, i, scale, attn, head * dv);
                }
                add(x[i], linear(attn, w.oProj(), null, h, heads * dv));
                add(x[i], gatedMlp(x[i], w.postNorm(), c.rmsNormEps(), w.gateUp(), w.down(), c.intermediateSize()));
            }
        }
        double[] last = rmsNorm(x[t - 1], finalNorm, c.rmsNormEps());
        return linear(last, lmHead, null, c.vocabSize(), h);
    }

    /** Rotates {@code vec[from, from + rotaryDim)} at {@code pos}, pairs as {@code p} says. */
    private static void rotate(double[] vec, int from, int pos, RopeParams p) {
        int rot = p.rotaryDim();
        for (int i = 0; i < rot / 2; i++) {
            double angle = pos * p.invFreq(i);
            int a = from + (p.interleave() ? 2 * i : i);
            int b = from + (p.interleave() ? 2 * i + 1 : i + rot / 2);
            double x0 = vec[a];
            double x1 = vec[b];
            vec[a] = x0 * Math.cos(angle) - x1 * Math.sin(angle);
            vec[b] = x1 * Math.cos(angle) + x0 * Math.sin(angle);
        }
    }

}
