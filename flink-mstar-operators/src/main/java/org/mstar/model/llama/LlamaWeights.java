package org.mstar.model.llama;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.device.UnsupportedOnDeviceException;
import org.mstar.model.ModelConfig;
import org.mstar.model.io.Checkpoint;

/**
 * All weights of a Llama-family model on one device, in one dtype, fused for the forward (see
 * {@link LlamaLayerWeights}). {@link #hfTensors()} maps the Hugging Face tensor names onto views of the fused
 * tensors; loading, random filling and checkpoint writing all go through that one map.
 *
 * <p>{@link #close()} frees every tensor once; with tied embeddings {@link #lmHead()} is the embedding tensor.
 */
public final class LlamaWeights implements AutoCloseable {
    /** Fills a device tensor (or view) with the values of the Hugging Face tensor {@code hfName}. */
    @FunctionalInterface
    interface TensorSource {
        void fill(String hfName, Tensor dst) throws IOException;
    }

    private final ModelConfig config;
    private final DType dtype;
    private final Tensor embedding;
    private final List<LlamaLayerWeights> layers;
    private final Tensor finalNorm;
    private final Tensor lmHead;
    private final List<Tensor> owned;

    private LlamaWeights(ModelConfig config, DType dtype, Tensor embedding, List<LlamaLayerWeights> layers,
                         Tensor finalNorm, Tensor lmHead, List<Tensor> owned) {
        this.config = config;
        this.dtype = dtype;
        this.embedding = embedding;
        this.layers = Collections.unmodifiableList(layers);
        this.finalNorm = finalNorm;
        this.lmHead = lmHead;
        this.owned = owned;
    }

    /**
     * Loads {@code folder}'s config.json and safetensors onto {@code device} as {@code dtype} (bf16 stays
     * bit-exact when the checkpoint is bf16).
     *
     * @throws org.mstar.model.ModelFormatException naming a missing tensor or one of the wrong shape
     */
    public static LlamaWeights load(Path folder, Device device, DType dtype) throws IOException {
        ModelConfig config = ModelConfig.load(folder);
        try (Checkpoint checkpoint = Checkpoint.open(folder)) {
            return load(checkpoint, config, device, dtype);
        }
    }

    /**
     * Loads the weights {@code config} declares from {@code checkpoint}. Tensors the model does not use are
     * ignored; lm_head.weight is not read when the embeddings are tied.
     *
     * @throws org.mstar.model.ModelFormatException naming a missing tensor or one of the wrong shape
     */
    public static LlamaWeights load(Checkpoint checkpoint, ModelConfig config, Device device, DType dtype)
            throws IOException {
        return fill(config, device, dtype, checkpoint::copyTo);
    }

    /** Allocates every tensor, then fills each Hugging Face view from {@code source}; frees all on failure. */
    static LlamaWeights fill(ModelConfig config, Device device, DType dtype, TensorSource source) throws IOException {
        LlamaWeights weights = allocate(config, device, dtype);
        try {
            for (Map.Entry<String, Tensor> e : weights.hfTensors().entrySet()) {
                source.fill(e.getKey(), e.getValue());
            }
            return weights;
        } catch (IOException | RuntimeException e) {
            weights.close();
            throw e;
        }
    }

    private static LlamaWeights allocate(ModelConfig c, Device device, DType dtype) {
        if (!dtype.isFloat()) {
            throw new IllegalArgumentException("weights must be a float dtype, got " + dtype);
        }
        requireRunnable(c, device, dtype);
        List<Tensor> owned = new ArrayList<>();
        try {
            long h = c.hiddenSize();
            long inter = c.intermediateSize();
            Tensor embedding = allocate(owned, device, dtype, c.vocabSize(), h);
            List<LlamaLayerWeights> layers = new ArrayList<>();
            for (int i = 0; i < c.numLayers(); i++) {
                layers.add(new LlamaLayerWeights(
                        allocate(owned, device, dtype, h),
                        allocate(owned, device, dtype, c.qkvRows(), h),
                        c.qkvBias() ? allocate(owned, device, dtype, c.qkvRows()) : null,
                        allocate(owned, device, dtype, h, c.qSize()),
                        allocate(owned, device, dtype, h),
                        allocate(owned, device, dtype, 2 * inter, h),
                        allocate(owned, device, dtype, h, inter)));
            }
            Tensor finalNorm = allocate(owned, device, dtype, h);
            Tensor lmHead = c.tieWordEmbeddings() ? embedding : allocate(owned, device, dtype, c.vocabSize(), h);
            return new LlamaWeights(c, dtype, embedding, layers, finalNorm, lmHead, owned);
        } catch (RuntimeException e) {
            owned.forEach(Tensor::close);
            throw e;
        }
    }

    /**
     * Before a byte is allocated: a model whose layers cannot run here fails now, not at its first step. The engine
     * keeps its KV cache in the weights' dtype.
     */
    private static void requireRunnable(ModelConfig c, Device device, DType dtype) {
        try {
            device.ops().requireAttentionHeadDim(c.headDim(), dtype);
        } catch (UnsupportedOnDeviceException e) {
            throw new UnsupportedOnDeviceException(device.name() + " cannot serve this model (head_dim " + c.headDim()
                    + "): " + e.getMessage());
        }
    }

    private static Tensor allocate(List<Tensor> owned, Device device, DType dtype, long... shape) {
        Tensor t = device.allocate(dtype, shape);
        owned.add(t);
        return t;
    }

    /**
     * Every weight under its Hugging Face name, as a view into the fused tensors, in a fixed order (embedding,
     * layers in order, final norm, then lm_head unless tied). Closing a view is not needed; {@link #close()}
     * frees the storage.
     */
    public Map<String, Tensor> hfTensors() {
        int q = config.qSize();
        int kv = config.kvSize();
        long inter = config.intermediateSize();
        Map<String, Tensor> m = new LinkedHashMap<>();
        m.put("model.embed_tokens.weight", embedding);
        for (int i = 0; i < layers.size(); i++) {
            LlamaLayerWeights l = layers.get(i);
            String p = "model.layers." + i + ".";
            m.put(p + "input_layernorm.weight", l.inputNorm());
            m.put(p + "self_attn.q_proj.weight", l.qkvWeight().rows(0, q));
            m.put(p + "self_attn.k_proj.weight", l.qkvWeight().rows(q, kv));
            m.put(p + "self_attn.v_proj.weight", l.qkvWeight().rows(q + kv, kv));
            if (l.qkvBias() != null) {
                m.put(p + "self_attn.q_proj.bias", l.qkvBias().rows(0, q));
                m.put(p + "self_attn.k_proj.bias", l.qkvBias().rows(q, kv));
                m.put(p + "self_attn.v_proj.bias", l.qkvBias().rows(q + kv, kv));
            }
            m.put(p + "self_attn.o_proj.weight", l.oWeight());
            m.put(p + "post_attention_layernorm.weight", l.postAttentionNorm());
            m.put(p + "mlp.gate_proj.weight", l.gateUpWeight().rows(0, inter));
            m.put(p + "mlp.up_proj.weight", l.gateUpWeight().rows(inter, inter));
            m.put(p + "mlp.down_proj.weight", l.downWeight());
        }
        m.put("model.norm.weight", finalNorm);
        if (!tiedEmbeddings()) {
            m.put("lm_head.weight", lmHead);
        }
        return m;
    }

    public ModelConfig config() {
        return config;
    }

    /** The dtype of every weight tensor. */
    public DType dtype() {
        return dtype;
    }

    public Device device() {
        return embedding.device();
    }

    /** {@code [vocab, H]}: token embeddings ({@code model.embed_tokens.weight}). */
    public Tensor embedding() {
        return embedding;
    }

    public List<LlamaLayerWeights> layers() {
        return layers;
    }

    public LlamaLayerWeights layer(int i) {
        return layers.get(i);
    }

    /** {@code [H]}: the RMSNorm after the last layer ({@code model.norm.weight}). */
    public Tensor finalNorm() {
        return finalNorm;
    }

    /** {@code [vocab, H]}: the output projection; the embedding tensor itself when tied. */
    public Tensor lmHead() {
        return lmHead;
    }

    public boolean tiedEmbeddings() {
        return lmHead == embedding;
    }

    /** Total bytes of weight storage on the device (a tied LM head counted once). */
    public long byteSize() {
        return owned.stream().mapToLong(Tensor::byteSize).sum();
    }

    @Override
    public void close() {
        owned.forEach(Tensor::close);
    }
}
