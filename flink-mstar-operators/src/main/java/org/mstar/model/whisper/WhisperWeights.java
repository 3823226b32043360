package org.mstar.model.whisper;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.model.io.Checkpoint;
import org.mstar.model.llama.LoadProgress;
import org.mstar.model.llama.RandomWeights;

/**
 * All weights of a Whisper model on one device, in one dtype, fused for the forward ({@link WhisperLayerWeights}).
 * {@link #hfTensors()} maps every Hugging Face tensor name onto a view of the fused tensors; loading and random
 * filling both go through that one map. The output projection is the token embedding (tied, as in every Whisper).
 */
public final class WhisperWeights implements AutoCloseable {
    /** Fills a device tensor (or view) with the values of the Hugging Face tensor {@code hfName}. */
    @FunctionalInterface
    interface TensorSource {
        void fill(String hfName, Tensor dst) throws IOException;
    }

    private final WhisperConfig config;
    private final DType dtype;
    private final Tensor conv1;
    private final Tensor conv1Bias;
    private final Tensor conv2;
    private final Tensor conv2Bias;
    private final Tensor encoderPositions;
    private final List<WhisperLayerWeights> encoderLayers;
    private final Tensor encoderNorm;
    private final Tensor encoderNormBias;
    private final Tensor embedding;
    private final Tensor decoderPositions;
    private final List<WhisperLayerWeights> decoderLayers;
    private final Tensor decoderNorm;
    private final Tensor decoderNormBias;
    private final List<Tensor> owned;

    private WhisperWeights(WhisperConfig config, Device device, DType dtype) {
        this.config = config;
        this.dtype = dtype;
        this.owned = new ArrayList<>();
        long d = config.dModel();
        try {
            conv1 = alloc(device, d, config.numMelBins(), 3);
            conv1Bias = alloc(device, d);
            conv2 = alloc(device, d, d, 3);
            conv2Bias = alloc(device, d);
            encoderPositions = alloc(device, config.maxSourcePositions(), d);
            List<WhisperLayerWeights> enc = new ArrayList<>();
            for (int i = 0; i < config.encoderLayers(); i++) {
                enc.add(layer(device, config.encoderFfn(), false));
            }
            encoderLayers = Collections.unmodifiableList(enc);
            encoderNorm = alloc(device, d);
            encoderNormBias = alloc(device, d);
            embedding = alloc(device, config.vocabSize(), d);
            decoderPositions = alloc(device, config.maxTargetPositions(), d);
            List<WhisperLayerWeights> dec = new ArrayList<>();
            for (int i = 0; i < config.decoderLayers(); i++) {
                dec.add(layer(device, config.decoderFfn(), true));
            }
            decoderLayers = Collections.unmodifiableList(dec);
            decoderNorm = alloc(device, d);
            decoderNormBias = alloc(device, d);
        } catch (RuntimeException e) {
            owned.forEach(Tensor::close);
            throw e;
        }
    }

    private WhisperLayerWeights layer(Device device, long ffn, boolean cross) {
        long d = config.dModel();
        return new WhisperLayerWeights(alloc(device, d), alloc(device, d), alloc(device, 3 * d, d),
                zeros(device, 3 * d), alloc(device, d, d), alloc(device, d),
                cross ? alloc(device, d) : null, cross ? alloc(device, d) : null,
                cross ? alloc(device, d, d) : null, cross ? alloc(device, d) : null,
                cross ? alloc(device, 2 * d, d) : null, cross ? zeros(device, 2 * d) : null,
                cross ? alloc(device, d, d) : null, cross ? alloc(device, d) : null,
                alloc(device, d), alloc(device, d), alloc(device, ffn, d), alloc(device, ffn),
                alloc(device, d, ffn), alloc(device, d));
    }

    private Tensor alloc(Device device, long... shape) {
        Tensor t = device.allocate(dtype, shape);
        owned.add(t);
        return t;
    }

    private Tensor zeros(Device device, long... shape) {
        Tensor t = device.zeros(dtype, shape);
        owned.add(t);
        return t;
    }

    /**
     * Loads {@code folder}'s safetensors onto {@code device} as {@code dtype}.
     *
     * @throws org.mstar.model.ModelFormatException naming a missing tensor or one of the wrong shape
     */
    public static WhisperWeights load(Path folder, WhisperConfig config, Device device, DType dtype)
            throws IOException {
        return load(folder, config, device, dtype, LoadProgress.NONE);
    }

    /** As {@link #load(Path, WhisperConfig, Device, DType)}, telling {@code progress} after each tensor. */
    public static WhisperWeights load(Path folder, WhisperConfig config, Device device, DType dtype,
                                      LoadProgress progress) throws IOException {
        try (Checkpoint checkpoint = Checkpoint.open(folder)) {
            return fill(config, device, dtype, checkpoint::copyTo, progress);
        }
    }

    /**
     * Seeded random weights of any geometry (benchmarks): matrices and embeddings as {@link RandomWeights} draws
     * them, LayerNorm weights near 1 and their biases near 0; equal seeds give equal models on every device.
     */
    public static WhisperWeights random(WhisperConfig config, Device device, DType dtype, long seed) {
        try {
            return fill(config, device, dtype, (name, dst) -> {
                boolean normWeight = name.contains("layer_norm") && name.endsWith(".weight");
                RandomWeights.fill(dst, seed, name, normWeight ? 1 : 0, normWeight ? 0.05 : 0.02);
            }, LoadProgress.NONE);
        } catch (IOException e) {
            throw new UncheckedIOException(e); // nothing here reads files
        }
    }

    static WhisperWeights fill(WhisperConfig config, Device device, DType dtype, TensorSource source,
                               LoadProgress progress) throws IOException {
        if (!dtype.isFloat()) {
            throw new IllegalArgumentException("weights must be a float dtype, got " + dtype);
        }
        WhisperWeights w = new WhisperWeights(config, device, dtype);
        try {
            Map<String, Tensor> tensors = w.hfTensors();
            long total = tensors.values().stream().mapToLong(Tensor::byteSize).sum();
            long loaded = 0;
            for (Map.Entry<String, Tensor> e : tensors.entrySet()) {
                source.fill(e.getKey(), e.getValue());
                loaded += e.getValue().byteSize();
                progress.loaded(loaded, total);
            }
            return w;
        } catch (IOException | RuntimeException e) {
            w.close();
            throw e;
        }
    }

    /** Every weight under its Hugging Face name, as a view into the fused tensors, in a fixed order. */
    public Map<String, Tensor> hfTensors() {
        long d = config.dModel();
        Map<String, Tensor> m = new LinkedHashMap<>();
        m.put("model.encoder.conv1.weight", conv1);
        m.put("model.encoder.conv1.bias", conv1Bias);
        m.put("model.encoder.conv2.weight", conv2);
        m.put("model.encoder.conv2.bias", conv2Bias);
        m.put("model.encoder.embed_positions.weight", encoderPositions);
        for (int i = 0; i < encoderLayers.size(); i++) {
            putLayer(m, "model.encoder.layers." + i + ".", encoderLayers.get(i), d);
        }
        m.put("model.encoder.layer_norm.weight", encoderNorm);
        m.put("model.encoder.layer_norm.bias", encoderNormBias);
        m.put("model.decoder.embed_tokens.weight", embedding);
        m.put("model.decoder.embed_positions.weight", decoderPositions);
        for (int i = 0; i < decoderLayers.size(); i++) {
            putLayer(m, "model.decoder.layers." + i + ".", decoderLayers.get(i), d);
        }
        m.put("model.decoder.layer_norm.weight", decoderNorm);
        m.put("model.decoder.layer_norm.bias", decoderNormBias);
        return m;
    }

    private static void putLayer(Map<String, Tensor> m, String p, WhisperLayerWeights l, long d) {
        m.put(p + "self_attn.q_proj.weight", l.qkv().rows(0, d));
        m.put(p + "self_attn.q_proj.bias", l.qkvBias().rows(0, d));
        m.put(p + "self_attn.k_proj.weight", l.qkv().rows(d, d));
        m.put(p + "self_attn.v_proj.weight", l.qkv().rows(2 * d, d));
        m.put(p + "self_attn.v_proj.bias", l.qkvBias().rows(2 * d, d));
        m.put(p + "self_attn.out_proj.weight", l.out());
        m.put(p + "self_attn.out_proj.bias", l.outBias());
        m.put(p + "self_attn_layer_norm.weight", l.selfNorm());
        m.put(p + "self_attn_layer_norm.bias", l.selfNormBias());
        if (l.crossQ() != null) {
            m.put(p + "encoder_attn.q_proj.weight", l.crossQ());
            m.put(p + "encoder_attn.q_proj.bias", l.crossQBias());
            m.put(p + "encoder_attn.k_proj.weight", l.crossKv().rows(0, d));
            m.put(p + "encoder_attn.v_proj.weight", l.crossKv().rows(d, d));
            m.put(p + "encoder_attn.v_proj.bias", l.crossKvBias().rows(d, d));
            m.put(p + "encoder_attn.out_proj.weight", l.crossOut());
            m.put(p + "encoder_attn.out_proj.bias", l.crossOutBias());
            m.put(p + "encoder_attn_layer_norm.weight", l.crossNorm());
            m.put(p + "encoder_attn_layer_norm.bias", l.crossNormBias());
        }
        m.put(p + "fc1.weight", l.fc1());
        m.put(p + "fc1.bias", l.fc1Bias());
        m.put(p + "fc2.weight", l.fc2());
        m.put(p + "fc2.bias", l.fc2Bias());
        m.put(p + "final_layer_norm.weight", l.mlpNorm());
        m.put(p + "final_layer_norm.bias", l.mlpNormBias());
    }

    public WhisperConfig config() { return config; }
    public DType dtype() { return dtype; }
    public Device device() { return embedding.device(); }
    /** {@code [d, mels, 3]}, {@code [d]}: the first convolution (stride 1, padding 1). */
    public Tensor conv1() { return conv1; }
    public Tensor conv1Bias() { return conv1Bias; }
    /** {@code [d, d, 3]}, {@code [d]}: the second convolution (stride 2, padding 1). */
    public Tensor conv2() { return conv2; }
    public Tensor conv2Bias() { return conv2Bias; }
    /** {@code [max_source_positions, d]}: the encoder's sinusoidal positions, as the checkpoint stores them. */
    public Tensor encoderPositions() { return encoderPositions; }
    public WhisperLayerWeights encoderLayer(int i) { return encoderLayers.get(i); }
    public Tensor encoderNorm() { return encoderNorm; }
    public Tensor encoderNormBias() { return encoderNormBias; }
    /** {@code [vocab, d]}: token embeddings, also the output projection. */
    public Tensor embedding() { return embedding; }
    /** {@code [max_target_positions, d]}: the decoder's learned positions. */
    public Tensor decoderPositions() { return decoderPositions; }
    public WhisperLayerWeights decoderLayer(int i) { return decoderLayers.get(i); }
    public Tensor decoderNorm() { return decoderNorm; }
    public Tensor decoderNormBias() { return decoderNormBias; }

    /** Total bytes of weight storage on the device. */
    public long byteSize() {
        return owned.stream().mapToLong(Tensor::byteSize).sum();
    }

    @Override
    public void close() {
        owned.forEach(Tensor::close);
    }
}
