package org.mstar.model.mamba;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Mamba2Shape;
import org.mstar.device.Tensor;
import org.mstar.model.HybridConfig;
import org.mstar.model.io.Checkpoint;
import org.mstar.model.llama.RandomWeights;

/**
 * The weights of a {@link HybridConfig} model on one device: projections and norms in the storage dtype, the
 * mixers' per-head parameters (A_log, dt_bias, D) and convolution in F32, as the scan reads them. An attention
 * layer's q/k/v and an MLP's gate/up are each one fused tensor, filled through row views under their checkpoint
 * names.
 */
public final class HybridWeights implements AutoCloseable {
    /** A Mamba2 mixer's tensors; {@code conv} is {@code [convDim, K]}, {@code convBias} null without a bias. */
    public record Mixer(Tensor inProj, Tensor conv, Tensor convBias, Tensor aLog, Tensor dtBias, Tensor d, Tensor norm,
                       Tensor outProj) {}

    /** An attention layer's fused q/k/v {@code [q + 2·kv, hidden]} and output projection. */
    public record Attention(Tensor qkv, Tensor o) {}

    /** The gated MLP's fused gate/up {@code [2·intermediate, hidden]} and down projection. */
    public record Mlp(Tensor gateUp, Tensor down) {}

    /** One layer: a mixer or an attention (the other null), and an MLP with its norm (both null for Mamba2). */
    public record Layer(Tensor inputNorm, Mixer mixer, Attention attention, Tensor mlpNorm, Mlp mlp) {}

    private final HybridConfig config;
    private final Device device;
    private final List<Tensor> owned = new ArrayList<>();
    /** Every tensor the checkpoint fills, by its name there. */
    private final Map<String, Tensor> byName = new LinkedHashMap<>();
    private final Tensor embedding;
    private final List<Layer> layers = new ArrayList<>();
    private final Tensor finalNorm;
    private final Tensor lmHead;

    private HybridWeights(HybridConfig config, Device device, DType dtype) {
        this.config = config;
        this.device = device;
        boolean mamba2 = config.family() == HybridConfig.Family.MAMBA2;
        String root = mamba2 ? "backbone." : "model.";
        int hidden = config.hiddenSize();
        this.embedding = named(root + (mamba2 ? "embeddings" : "embed_tokens") + ".weight", dtype, config.vocabSize(),
                hidden);
        for (int l = 0; l < config.numLayers(); l++) {
            String p = root + "layers." + l + ".";
            Tensor inputNorm = named(p + (mamba2 ? "norm" : "input_layernorm") + ".weight", dtype, hidden);
            Mixer mixer = config.isAttention(l) ? null : mixer(p + (mamba2 ? "mixer." : "mamba."), dtype);
            Attention attention = config.isAttention(l) ? attention(p + "self_attn.", dtype) : null;
            Tensor mlpNorm = mamba2 ? null : named(p + "pre_ff_layernorm.weight", dtype, hidden);
            Mlp mlp = mamba2 ? null : mlp(p + "feed_forward.", dtype);
            layers.add(new Layer(inputNorm, mixer, attention, mlpNorm, mlp));
        }
        this.finalNorm = named(root + (mamba2 ? "norm_f" : "final_layernorm") + ".weight", dtype, hidden);
        this.lmHead = config.tieWordEmbeddings() ? embedding
                : named("lm_head.weight", dtype, config.vocabSize(), hidden);
    }

    private Mixer mixer(String p, DType dtype) {
        Mamba2Shape s = config.mixer();
        int conv = s.convDim();
        Tensor convWeight = named(p + "conv1d.weight", DType.F32, conv, 1, s.convKernel());
        return new Mixer(named(p + "in_proj.weight", dtype, s.projWidth(), config.hiddenSize()),
                convWeight.reshape(conv, s.convKernel()),
                config.convBias() ? named(p + "conv1d.bias", DType.F32, conv) : null,
                named(p + "A_log", DType.F32, s.heads()), named(p + "dt_bias", DType.F32, s.heads()),
                named(p + "D", DType.F32, s.heads()), named(p + "norm.weight", dtype, s.inner()),
                named(p + "out_proj.weight", dtype, config.hiddenSize(), s.inner()));
    }

    private Attention attention(String p, DType dtype) {
        int q = config.attentionHeads() * config.attentionHeadDim();
        int kv = config.kvHeads() * config.attentionHeadDim();
        Tensor qkv = allocate(dtype, q + 2L * kv, config.hiddenSize());
        byName.put(p + "q_proj.weight", qkv.rows(0, q));
        byName.put(p + "k_proj.weight", qkv.rows(q, kv));
        byName.put(p + "v_proj.weight", qkv.rows(q + kv, kv));
        return new Attention(qkv, named(p + "o_proj.weight", dtype, config.hiddenSize(), q));
    }

    private Mlp mlp(String p, DType dtype) {
        int inter = config.intermediateSize();
        Tensor gateUp = allocate(dtype, 2L * inter, config.hiddenSize());
        byName.put(p + "gate_proj.weight", gateUp.rows(0, inter));
        byName.put(p + "up_proj.weight", gateUp.rows(inter, inter));
        return new Mlp(gateUp, named(p + "down_proj.weight", dtype, config.hiddenSize(), inter));
    }

    private Tensor named(String name, DType dtype, long... shape) {
        Tensor t = allocate(dtype, shape);
        byName.put(name, t);
        return t;
    }

    private Tensor allocate(DType dtype, long... shape) {
        Tensor t = device.allocate(dtype, shape);
        owned.add(t);
        return t;
    }

    /**
     * Loads {@code folder}'s checkpoint; tensors the model does not use are ignored.
     *
     * @throws org.mstar.model.ModelFormatException naming a missing tensor or one of the wrong shape
     */
    public static HybridWeights load(Path folder, HybridConfig config, Device device, DType dtype) throws IOException {
        HybridWeights w = new HybridWeights(config, device, dtype);
        try (Checkpoint checkpoint = Checkpoint.open(folder)) {
            for (Map.Entry<String, Tensor> e : w.byName.entrySet()) {
                checkpoint.copyTo(e.getKey(), e.getValue());
            }
            return w;
        } catch (IOException | RuntimeException e) {
            w.close();
            throw e;
        }
    }

    /**
     * Seeded random weights of {@code config}'s geometry, for checks and benchmarks, drawn as a checkpoint's are
     * trained into: projections and embeddings ~ N(0, 0.02²), norm weights ~ 1 + N(0, 0.05²), A = −exp(A_log)
     * around −4, step sizes (softplus of dt_bias) around 0.03, D around 1, the convolution ~ N(0, 0.3²). Each value
     * depends only on (seed, tensor name, element), as {@link RandomWeights#fill} draws it.
     */
    public static HybridWeights random(HybridConfig config, Device device, DType dtype, long seed) {
        HybridWeights w = new HybridWeights(config, device, dtype);
        try {
            w.byName.forEach((name, t) -> {
                double[] meanStd = name.endsWith("norm.weight") || name.endsWith("layernorm.weight")
                        || name.endsWith("norm_f.weight") ? new double[] {1, 0.05}
                        : name.endsWith("A_log") ? new double[] {Math.log(4), 0.5}
                        : name.endsWith("dt_bias") ? new double[] {-3.5, 0.5}
                        : name.endsWith(".D") ? new double[] {1, 0.1}
                        : name.contains("conv1d") ? new double[] {0, 0.3} : new double[] {0, 0.02};
                RandomWeights.fill(t, seed, name, meanStd[0], meanStd[1]);
            });
            return w;
        } catch (RuntimeException e) {
            w.close();
            throw e;
        }
    }

    public HybridConfig config() {
        return config;
    }

    /** Every tensor under its checkpoint name, in the checkpoint's shape (a tied LM head is the embedding's). */
    public Map<String, Tensor> hfTensors() {
        return Collections.unmodifiableMap(byName);
    }

    public Device device() {
        return device;
    }

    public Tensor embedding() {
        return embedding;
    }

    public Layer layer(int l) {
        return layers.get(l);
    }

    public Tensor finalNorm() {
        return finalNorm;
    }

    public Tensor lmHead() {
        return lmHead;
    }

    @Override
    public void close() {
        owned.forEach(Tensor::close);
        owned.clear();
    }
}
