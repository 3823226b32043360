package org.mstar.model.llama;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Fp8Weight;
import org.mstar.device.Tensor;
import org.mstar.device.UnsupportedOnDeviceException;
import org.mstar.model.ModelConfig;
import org.mstar.model.MoeConfig;
import org.mstar.model.WeightQuantization;
import org.mstar.model.io.Checkpoint;
import org.mstar.model.io.Fp8WeightReader;
import org.mstar.model.moe.MoeLayerWeights;

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
    /** Each latent attention layer's weights for prefill chunks, or null (not latent, or not derivable). */
    private final LatentPrefillWeights[] latentPrefill;

    private LlamaWeights(ModelConfig config, DType dtype, Tensor embedding, List<LlamaLayerWeights> layers,
                         Tensor finalNorm, Tensor lmHead, List<Tensor> owned, LatentPrefillWeights[] latentPrefill) {
        this.config = config;
        this.dtype = dtype;
        this.embedding = embedding;
        this.layers = Collections.unmodifiableList(layers);
        this.finalNorm = finalNorm;
        this.lmHead = lmHead;
        this.owned = owned;
        this.latentPrefill = latentPrefill;
    }

    /**
     * Weights made elsewhere (one rank's shard, {@link ShardedWeights}): {@code owned} is freed by {@link #close()}.
     */
    static LlamaWeights of(ModelConfig config, DType dtype, Tensor embedding, List<LlamaLayerWeights> layers,
                           Tensor finalNorm, Tensor lmHead, List<Tensor> owned) {
        return new LlamaWeights(config, dtype, embedding, layers, finalNorm, lmHead, owned, null);
    }

    /**
     * Loads {@code folder}'s config.json and safetensors onto {@code device} as {@code dtype} (bf16 stays
     * bit-exact when the checkpoint is bf16). FP8 weights that config.json's quantization_config declares are
     * dequantised into {@code dtype} ({@link Fp8WeightReader}).
     *
     * @throws org.mstar.model.ModelFormatException naming a missing tensor or one of the wrong shape
     */
    public static LlamaWeights load(Path folder, Device device, DType dtype) throws IOException {
        return load(folder, device, dtype, LoadProgress.NONE);
    }

    /** As {@link #load(Path, Device, DType)}, telling {@code progress} after each tensor. */
    public static LlamaWeights load(Path folder, Device device, DType dtype, LoadProgress progress) throws IOException {
        return load(folder, device, dtype, WeightQuantization.NONE, progress);
    }

    /**
     * As {@link #load(Path, Device, DType, LoadProgress)}, keeping the projections in FP8 on the device when
     * {@code quantization} asks for it ({@link WeightQuantization#FP8}: an FP8 checkpoint keeps its codes and scales,
     * any other is quantised at load); every other weight is {@code dtype}.
     */
    public static LlamaWeights load(Path folder, Device device, DType dtype, WeightQuantization quantization,
                                    LoadProgress progress) throws IOException {
        return load(folder, device, dtype, quantization, progress, true);
    }

    /**
     * The whole model in {@code dtype} on {@code host}, to be split over devices ({@link ShardedWeights#split}): as
     * {@link #load(Path, Device, DType, LoadProgress)} without the forms only a single-device model computes with
     * ({@link #latentPrefill}), which would be derived on the host for nothing.
     */
    public static LlamaWeights loadToSplit(Path folder, Device host, DType dtype, LoadProgress progress)
            throws IOException {
        return load(folder, host, dtype, WeightQuantization.NONE, progress, false);
    }

    private static LlamaWeights load(Path folder, Device device, DType dtype, WeightQuantization quantization,
                                     LoadProgress progress, boolean latentPrefill) throws IOException {
        ModelConfig config = ModelConfig.load(folder);
        try (Checkpoint checkpoint = Checkpoint.open(folder)) {
            Fp8Residency fp8 = quantization.fp8Weights() ? Fp8Residency.of(config, checkpoint, quantization) : null;
            return fill(config, device, dtype, fp8, source(checkpoint, config), progress, fusedExperts(checkpoint),
                    latentPrefill);
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
        return fill(config, device, dtype, null, source(checkpoint, config), LoadProgress.NONE, fusedExperts(checkpoint),
                true);
    }

    /** Whether the checkpoint holds its routed experts stacked, as transformers 5 does in memory, not one by one. */
    private static boolean fusedExperts(Checkpoint checkpoint) {
        return checkpoint.names().stream().anyMatch(n -> n.endsWith(".mlp.experts.gate_up_proj"));
    }

    /** The checkpoint's tensors as real values: FP8 weights dequantised when the config declares them. */
    private static TensorSource source(Checkpoint checkpoint, ModelConfig config) {
        return config.quantization().<TensorSource>map(q -> new Fp8WeightReader(checkpoint, q)::copyTo)
                .orElse(checkpoint::copyTo);
    }

    /** Allocates every tensor, then fills each Hugging Face view from {@code source}; frees all on failure. */
    static LlamaWeights fill(ModelConfig config, Device device, DType dtype, TensorSource source) throws IOException {
        return fill(config, device, dtype, null, source, LoadProgress.NONE, false, true);
    }

    /** As {@link #fill(ModelConfig, Device, DType, TensorSource)}, the projections {@code fp8} names kept in FP8. */
    static LlamaWeights fill(ModelConfig config, Device device, DType dtype, Fp8Residency fp8, TensorSource source)
            throws IOException {
        return fill(config, device, dtype, fp8, source, LoadProgress.NONE, false, true);
    }

    /** @param latentPrefill whether a latent attention model gets its prefill form ({@link #latentPrefill}) */
    private static LlamaWeights fill(ModelConfig config, Device device, DType dtype, Fp8Residency fp8,
                                     TensorSource source, LoadProgress progress, boolean fusedExperts,
                                     boolean latentPrefill) throws IOException {
        LlamaWeights weights = allocate(config, device, dtype, fp8);
        try {
            Map<String, Tensor> tensors = weights.hfTensors(fusedExperts);
            long total = tensors.values().stream().mapToLong(Tensor::byteSize).sum();
            long loaded = 0;
            for (Map.Entry<String, Tensor> e : tensors.entrySet()) {
                if (e.getValue() instanceof Fp8Weight f) {
                    fp8.fill(e.getKey(), f, dtype, source);
                } else {
                    source.fill(e.getKey(), e.getValue());
                }
                if (isNorm(e.getKey()) && config.normWeightOffset() != 0) {
                    addOnHost(e.getValue(), config.normWeightOffset());
                }
                loaded += e.getValue().byteSize();
                progress.loaded(loaded, total);
            }
            return latentPrefill && config.latentAttention().isPresent() ? weights.withLatentPrefill(device) : weights;
        } catch (IOException | RuntimeException e) {
            weights.close();
            throw e;
        }
    }

    /**
     * These weights with each latent layer's prefill form ({@link LatentPrefillWeights}) derived from the loaded ones,
     * allocated now so that the engine's memory sizing counts them.
     */
    private LlamaWeights withLatentPrefill(Device device) {
        LatentPrefillWeights[] derived = new LatentPrefillWeights[layers.size()];
        for (int l = 0; l < derived.length; l++) {
            derived[l] = LatentPrefillWeights.derive(layers.get(l).latentAttention(), config.latentAttention().orElseThrow(),
                    config.numHeads(), device, dtype, owned);
        }
        return new LlamaWeights(config, dtype, embedding, layers, finalNorm, lmHead, owned, derived);
    }

    /** Layer {@code layer}'s latent attention weights for prefill chunks, or null where there are none. */
    public LatentPrefillWeights latentPrefill(int layer) {
        return latentPrefill == null ? null : latentPrefill[layer];
    }

    /** Whether the Hugging Face tensor {@code hfName} is an RMSNorm weight (whose storage may be offset, see below). */
    static boolean isNorm(String hfName) {
        return hfName.endsWith("norm.weight");
    }

    /**
     * The weight under {@code hfName} as the checkpoint stores it: a copy with the config's norm offset taken off
     * again, or the tensor itself (the caller closes a copy, never the tensor itself).
     */
    Tensor checkpointValues(String hfName, Tensor stored) {
        if (!isNorm(hfName) || config.normWeightOffset() == 0) {
            return stored;
        }
        Device device = stored.device();
        float[] v = device.toFloats(stored);
        for (int i = 0; i < v.length; i++) {
            v[i] -= config.normWeightOffset();
        }
        return device.fromFloats(v, stored.dtype(), stored.shape());
    }

    private static void addOnHost(Tensor t, float offset) {
        Device device = t.device();
        float[] v = device.toFloats(t);
        for (int i = 0; i < v.length; i++) {
            v[i] += offset;
        }
        try (Tensor shifted = device.fromFloats(v, t.dtype(), t.shape())) {
            device.copy(shifted, t);
        }
    }

    /** Every tensor of the model; the projections {@code fp8} keeps in FP8 (all in {@code dtype} when null). */
    private static LlamaWeights allocate(ModelConfig c, Device device, DType dtype, Fp8Residency fp8) {
        if (!dtype.isFloat()) {
            throw new IllegalArgumentException("weights must be a float dtype, got " + dtype);
        }
        requireRunnable(c, device, dtype);
        List<Tensor> owned = new ArrayList<>();
        try {
            long h = c.hiddenSize();
            long inter = c.intermediateSize();
            Tensor embedding = allocate(owned, device, dtype, c.vocabSize(), h);
            // norms offset by 1 (Gemma) stay fp32 so that 1 + w is not rounded to the storage dtype
            DType norms = c.normWeightOffset() != 0 ? DType.F32 : dtype;
            List<LlamaLayerWeights> layers = new ArrayList<>();
            boolean latent = c.latentAttention().isPresent();
            Projections p = new Projections(device, dtype, fp8, owned);
            for (int i = 0; i < c.numLayers(); i++) {
                boolean sparse = c.moe().isPresent() && c.moe().get().sparse(i);
                String attn = "model.layers." + i + ".self_attn.";
                String mlp = "model.layers." + i + ".mlp.";
                layers.add(new LlamaLayerWeights(
                        allocate(owned, device, norms, h),
                        latent ? null : c.fusedCheckpointProjections() ? p.of(h, attn + "qkv_proj", c.qkvRows())
                                : p.of(h, attn + "q_proj", c.qSize(), attn + "k_proj", c.kvSize(), attn + "v_proj",
                                        c.kvSize()),
                        c.qkvBias() ? allocate(owned, device, dtype, c.qkvRows()) : null,
                        latent ? null : p.of(c.qSize(), attn + "o_proj", h),
                        allocate(owned, device, norms, h),
                        sparse ? null : c.fusedCheckpointProjections() ? p.of(h, mlp + "gate_up_proj", 2 * inter)
                                : p.of(h, mlp + "gate_proj", inter, mlp + "up_proj", inter),
                        sparse ? null : p.of(inter, mlp + "down_proj", h),
                        c.qkNorm() ? allocate(owned, device, norms, c.qNormSize()) : null,
                        c.qkNorm() ? allocate(owned, device, norms, c.kNormSize()) : null,
                        c.sandwichNorms() ? allocate(owned, device, norms, h) : null,
                        c.sandwichNorms() ? allocate(owned, device, norms, h) : null,
                        sparse ? experts(owned, device, dtype, c) : null,
                        latent ? LatentAttentionWeights.allocate(c, owned, device, dtype, norms) : null));
            }
            Tensor finalNorm = allocate(owned, device, norms, h);
            Tensor lmHead = c.tieWordEmbeddings() ? embedding : p.of(h, "lm_head", c.vocabSize());
            return new LlamaWeights(c, dtype, embedding, layers, finalNorm, lmHead, owned, null);
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
        if (c.latentAttention().isPresent()) {
            return; // latent attention runs its own kernels, which check their shapes at launch
        }
        try {
            device.ops().requireAttentionHeadDim(c.headDim(), dtype);
        } catch (UnsupportedOnDeviceException e) {
            throw new UnsupportedOnDeviceException(device.name() + " cannot serve this model (head_dim " + c.headDim()
                    + "): " + e.getMessage());
        }
    }

    private static MoeLayerWeights experts(List<Tensor> owned, Device device, DType dtype, ModelConfig c) {
        MoeConfig moe = c.moe().orElseThrow();
        long experts = moe.numExperts();
        long width = moe.expertIntermediateSize();
        long h = c.hiddenSize();
        long shared = moe.sharedIntermediateSize();
        return new MoeLayerWeights(allocate(owned, device, dtype, experts, h),
                allocate(owned, device, dtype, experts, 2 * width, h),
                allocate(owned, device, dtype, experts, h, width),
                shared == 0 ? null : new MoeLayerWeights.SharedExperts(allocate(owned, device, dtype, 2 * shared, h),
                        allocate(owned, device, dtype, h, shared)));
    }

    static Tensor allocate(List<Tensor> owned, Device device, DType dtype, long... shape) {
        Tensor t = device.allocate(dtype, shape);
        owned.add(t);
        return t;
    }

    /** Allocates the (fused) projections: in {@code dtype}, or in FP8 where {@code fp8} keeps them so. */
    private record Projections(Device device, DType dtype, Fp8Residency fp8, List<Tensor> owned) {
        /**
         * The projection of input width {@code k} whose parts are the Hugging Face modules and row counts in
         * {@code parts} (name, rows, name, rows, ...).
         */
        Tensor of(long k, Object... parts) {
            String[] names = new String[parts.length / 2];
            long[] rows = new long[parts.length / 2];
            for (int i = 0; i < names.length; i++) {
                names[i] = parts[2 * i] + ".weight";
                rows[i] = ((Number) parts[2 * i + 1]).longValue();
            }
            if (fp8 == null) {
                return allocate(owned, device, dtype, Arrays.stream(rows).sum(), k);
            }
            Tensor t = fp8.allocate(device, dtype, k, names, rows);
            owned.add(t);
            return t;
        }
    }

    /**
     * Every weight under its Hugging Face name, as a view into the fused tensors, in a fixed order (embedding,
     * layers in order, final norm, then lm_head unless tied). Closing a view is not needed; {@link #close()}
     * frees the storage.
     */
    public Map<String, Tensor> hfTensors() {
        return hfTensors(false);
    }

    /**
     * As {@link #hfTensors()}, with the routed experts of each sparse layer under transformers 5's fused names when
     * {@code fusedExperts} ({@link MoeLayerWeights#hfTensors}).
     */
    Map<String, Tensor> hfTensors(boolean fusedExperts) {
        int q = config.qSize();
        int kv = config.kvSize();
        long inter = config.intermediateSize();
        Map<String, Tensor> m = new LinkedHashMap<>();
        m.put("model.embed_tokens.weight", embedding);
        for (int i = 0; i < layers.size(); i++) {
            LlamaLayerWeights l = layers.get(i);
            String p = "model.layers." + i + ".";
            m.put(p + "input_layernorm.weight", l.inputNorm());
            if (l.latentAttention() != null) {
                l.latentAttention().putHfTensors(p + "self_attn.", m);
            } else if (config.fusedCheckpointProjections()) {
                m.put(p + "self_attn.qkv_proj.weight", l.qkvWeight());
            } else {
                m.put(p + "self_attn.q_proj.weight", l.qkvWeight().rows(0, q));
                m.put(p + "self_attn.k_proj.weight", l.qkvWeight().rows(q, kv));
                m.put(p + "self_attn.v_proj.weight", l.qkvWeight().rows(q + kv, kv));
            }
            if (l.qkvBias() != null) {
                m.put(p + "self_attn.q_proj.bias", l.qkvBias().rows(0, q));
                m.put(p + "self_attn.k_proj.bias", l.qkvBias().rows(q, kv));
                m.put(p + "self_attn.v_proj.bias", l.qkvBias().rows(q + kv, kv));
            }
            if (l.qNorm() != null) {
                m.put(p + "self_attn.q_norm.weight", l.qNorm());
                m.put(p + "self_attn.k_norm.weight", l.kNorm());
            }
            if (l.oWeight() != null) {
                m.put(p + "self_attn.o_proj.weight", l.oWeight());
            }
            if (l.attentionOutputNorm() != null) {
                m.put(p + "post_attention_layernorm.weight", l.attentionOutputNorm());
                m.put(p + "pre_feedforward_layernorm.weight", l.postAttentionNorm());
                m.put(p + "post_feedforward_layernorm.weight", l.mlpOutputNorm());
            } else {
                m.put(p + "post_attention_layernorm.weight", l.postAttentionNorm());
            }
            if (l.moe() != null) {
                m.putAll(l.moe().hfTensors(p + "mlp.", fusedExperts));
            } else if (config.fusedCheckpointProjections()) {
                m.put(p + "mlp.gate_up_proj.weight", l.gateUpWeight());
                m.put(p + "mlp.down_proj.weight", l.downWeight());
            } else {
                m.put(p + "mlp.gate_proj.weight", l.gateUpWeight().rows(0, inter));
                m.put(p + "mlp.up_proj.weight", l.gateUpWeight().rows(inter, inter));
                m.put(p + "mlp.down_proj.weight", l.downWeight());
            }
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

    /** The dtype of every weight tensor (RMSNorm weights of a model with a norm offset are F32). */
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
