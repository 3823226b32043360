package org.mstar.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import org.mstar.device.DType;
import org.mstar.device.RopeParams;

/**
 * The geometry and numerics of a Llama-family decoder, as a Hugging Face {@code config.json} declares them
 * ({@link #load}, {@link #toJson}); built by hand with {@link #builder}.
 *
 * @param architecture which Hugging Face model class the checkpoint was saved from
 * @param hiddenSize {@code hidden_size}, H
 * @param intermediateSize {@code intermediate_size}, I (MLP width)
 * @param numLayers {@code num_hidden_layers}
 * @param numHeads {@code num_attention_heads}, Hq
 * @param numKvHeads {@code num_key_value_heads}, Hkv (defaults to Hq); Hq is a multiple of it
 * @param headDim {@code head_dim}, D (defaults to H / Hq)
 * @param rmsNormEps {@code rms_norm_eps}
 * @param ropeTheta {@code rope_theta}, the RoPE base
 * @param ropeScaling {@code rope_scaling}
 * @param partialRotaryFactor {@code partial_rotary_factor}: the fraction of each head that RoPE rotates (1 = all)
 * @param maxPositionEmbeddings {@code max_position_embeddings}: the context length in tokens
 * @param vocabSize {@code vocab_size}: rows of the embedding and the LM head
 * @param tieWordEmbeddings {@code tie_word_embeddings}: the LM head reuses the embedding matrix
 * @param slidingWindow attention window in tokens of the windowed layers; 0 = none
 * @param firstSlidingWindowLayer first layer that uses the window (Qwen2 {@code max_window_layers}; 0 for Mistral),
 *     when {@code windowedLayers} is empty
 * @param windowedLayers {@code layer_types} as one flag a layer (true = "sliding_attention"), or empty when the
 *     windowed layers are those from {@code firstSlidingWindowLayer} on
 * @param bosTokenId {@code bos_token_id}, when declared
 * @param eosTokenIds {@code eos_token_id}, as a list (config.json gives an int or a list)
 * @param dtype {@code torch_dtype}: the dtype the checkpoint was saved in (F32 when absent, as transformers assumes)
 * @param localRopeTheta RoPE base of the windowed layers (Gemma 3 {@code rope_local_base_freq}, unscaled); 0 = they
 *     rotate as the others do
 * @param queryPreAttnScalar Gemma 3 {@code query_pre_attn_scalar}: attention scores are scaled by its inverse square
 *     root instead of head_dim's; 0 = head_dim
 * @param quantization {@code quantization_config}: how the checkpoint stores FP8 Linear weights, when it does;
 *     they are dequantised at load, so the forward never sees it
 * @param moe the routed experts of a mixture-of-experts architecture (OLMoE, Qwen3-MoE, DeepSeek-V2 with sparse
 *     layers); empty for the others
 * @param latentAttention DeepSeek-V2's latent attention geometry, present exactly for {@link Architecture#DEEPSEEK_V2};
 *     its head dim is then {@code qk_rope_head_dim} (the dims RoPE rotates) and its KV heads are its heads
 */
public record ModelConfig(Architecture architecture, int hiddenSize, int intermediateSize, int numLayers,
                          int numHeads, int numKvHeads, int headDim, double rmsNormEps, double ropeTheta,
                          RopeScaling ropeScaling, double partialRotaryFactor, int maxPositionEmbeddings,
                          int vocabSize, boolean tieWordEmbeddings, int slidingWindow,
                          int firstSlidingWindowLayer, List<Boolean> windowedLayers, OptionalInt bosTokenId,
                          List<Integer> eosTokenIds, DType dtype, double localRopeTheta, double queryPreAttnScalar,
                          Optional<Fp8Quantization> quantization, Optional<MoeConfig> moe,
                          Optional<LatentAttention> latentAttention) {

    /** The file name inside a model folder. */
    public static final String FILE_NAME = "config.json";

    public ModelConfig {
        Objects.requireNonNull(architecture, "architecture");
        Objects.requireNonNull(ropeScaling, "ropeScaling");
        Objects.requireNonNull(bosTokenId, "bosTokenId");
        Objects.requireNonNull(dtype, "dtype");
        Objects.requireNonNull(quantization, "quantization");
        Objects.requireNonNull(moe, "moe");
        Objects.requireNonNull(latentAttention, "latentAttention");
        positive("hidden_size", hiddenSize);
        positive("intermediate_size", intermediateSize);
        positive("num_hidden_layers", numLayers);
        positive("num_attention_heads", numHeads);
        positive("num_key_value_heads", numKvHeads);
        positive("head_dim", headDim);
        positive("max_position_embeddings", maxPositionEmbeddings);
        positive("vocab_size", vocabSize);
        if (numHeads % numKvHeads != 0) {
            throw new ModelFormatException("num_attention_heads (" + numHeads
                    + ") must be a multiple of num_key_value_heads (" + numKvHeads + ")");
        }
        if (!(rmsNormEps > 0) || !(ropeTheta > 0)) {
            throw new ModelFormatException("rms_norm_eps and rope_theta must be > 0, got " + rmsNormEps + ", " + ropeTheta);
        }
        if (!(partialRotaryFactor > 0 && partialRotaryFactor <= 1)) {
            throw new ModelFormatException("partial_rotary_factor must be in (0, 1], got " + partialRotaryFactor);
        }
        int rotary = (int) (headDim * partialRotaryFactor);
        if (rotary == 0 || rotary % 2 != 0) {
            throw new ModelFormatException("head_dim " + headDim + " × partial_rotary_factor " + partialRotaryFactor
                    + " must give an even, non-zero number of rotated dims, got " + rotary);
        }
        if (slidingWindow < 0 || firstSlidingWindowLayer < 0) {
            throw new ModelFormatException("sliding_window and max_window_layers must be >= 0, got "
                    + slidingWindow + ", " + firstSlidingWindowLayer);
        }
        windowedLayers = List.copyOf(windowedLayers);
        if (!windowedLayers.isEmpty() && windowedLayers.size() != numLayers) {
            throw new ModelFormatException("layer_types names " + windowedLayers.size() + " layers, num_hidden_layers is "
                    + numLayers);
        }
        if (windowedLayers.contains(true) && slidingWindow == 0) {
            throw new ModelFormatException("layer_types has sliding_attention layers but sliding_window is not set");
        }
        if (localRopeTheta < 0 || queryPreAttnScalar < 0) {
            throw new ModelFormatException("rope_local_base_freq and query_pre_attn_scalar must be >= 0, got "
                    + localRopeTheta + ", " + queryPreAttnScalar);
        }
        // what config.json cannot say for the architecture, the forward must not assume either
        if (architecture == Architecture.LLAMA && slidingWindow != 0) {
            throw new ModelFormatException("LlamaForCausalLM has no sliding window, got " + slidingWindow);
        }
        if (architecture != Architecture.GEMMA3 && (localRopeTheta != 0 || queryPreAttnScalar != 0)) {
            throw new ModelFormatException(architecture.hfName() + " has no rope_local_base_freq or "
                    + "query_pre_attn_scalar, got " + localRopeTheta + ", " + queryPreAttnScalar);
        }
        if (architecture == Architecture.MISTRAL && firstSlidingWindowLayer != 0) {
            throw new ModelFormatException("MistralForCausalLM slides over every layer, got first layer "
                    + firstSlidingWindowLayer);
        }
        if ((architecture == Architecture.DEEPSEEK_V2) != latentAttention.isPresent()) {
            throw new ModelFormatException(architecture.hfName() + (latentAttention.isPresent() ? " has no" : " needs")
                    + " latent attention (kv_lora_rank)");
        }
        latentAttention.ifPresent(m -> requireLatentGeometry(m, numHeads, numKvHeads, headDim, partialRotaryFactor));
        if (bosTokenId.isPresent()) {
            tokenInVocab("bos_token_id", bosTokenId.getAsInt(), vocabSize);
        }
        eosTokenIds = List.copyOf(eosTokenIds);
        for (int id : eosTokenIds) {
            tokenInVocab("eos_token_id", id, vocabSize);
        }
        if (!dtype.isFloat()) {
            throw new ModelFormatException("torch_dtype must be a float type, got " + dtype);
        }
        boolean moeArchitecture = architecture == Architecture.OLMOE || architecture == Architecture.QWEN3_MOE;
        // DeepSeek-V2 has experts exactly when some layer is sparse
        if (architecture != Architecture.DEEPSEEK_V2 && moeArchitecture != moe.isPresent()) {
            throw new ModelFormatException(architecture.hfName() + (moeArchitecture ? " needs" : " has no")
                    + " routed experts");
        }
        if (architecture == Architecture.DEEPSEEK_V2) {
            moe.ifPresent(DeepseekV2Json::requireExpressible);
        } else if (moe.isPresent() && moe.get().sharedIntermediateSize() != 0) {
            throw new ModelFormatException(architecture.hfName() + " has no shared experts");
        }
        if (architecture == Architecture.OLMOE && moe.get().expertIntermediateSize() != intermediateSize) {
            throw new ModelFormatException("OLMoE's experts are intermediate_size " + intermediateSize + " wide, got "
                    + moe.get().expertIntermediateSize());
        }
        if (moe.isPresent() && moe.get().sparseLayers().size() != numLayers) {
            throw new ModelFormatException("the experts name " + moe.get().sparseLayers().size()
                    + " layers, num_hidden_layers is " + numLayers);
        }
    }

    private static void positive(String key, int value) {
        if (value <= 0) {
            throw new ModelFormatException(key + " must be > 0, got " + value);
        }
    }

    /** Every head has its own key and value from the latent, and RoPE rotates exactly the rope part. */
    private static void requireLatentGeometry(LatentAttention m, int numHeads, int numKvHeads, int headDim,
                                              double partialRotaryFactor) {
        if (numKvHeads != numHeads) {
            throw new ModelFormatException("num_key_value_heads (" + numKvHeads + ") must equal num_attention_heads ("
                    + numHeads + "): latent attention gives every head its own key and value");
        }
        if (headDim != m.qkRopeHeadDim() || partialRotaryFactor != 1) {
            throw new ModelFormatException("head_dim (" + headDim + ") must equal qk_rope_head_dim (" + m.qkRopeHeadDim()
                    + ") with no partial_rotary_factor: RoPE rotates the rope part of each head, all of it");
        }
    }

    private static void tokenInVocab(String key, int id, int vocabSize) {
        if (id < 0 || id >= vocabSize) {
            throw new ModelFormatException(key + " " + id + " is outside the vocabulary [0, " + vocabSize + ")");
        }
    }

    /**
     * Reads {@code config.json} from a model folder, or the file itself when {@code path} is a file.
     *
     * @throws ModelFormatException naming the file when it is not one JSON object (trailing text included)
     */
    public static ModelConfig load(Path path) throws IOException {
        Path file = Files.isDirectory(path) ? path.resolve(FILE_NAME) : path;
        return fromJson(HfConfigJson.readFile(file), file.toString());
    }

    /**
     * Parses a config.json tree.
     *
     * @param source names the file in error messages
     * @throws ModelFormatException for a missing or ill-typed key, an unknown architecture, or a feature this
     *     library does not implement (named in the message)
     */
    public static ModelConfig fromJson(JsonNode root, String source) {
        return HfConfigJson.parseModelConfig(new ConfigFields(root, source));
    }

    /** This config as config.json content that {@link #fromJson} reads back to an equal config. */
    public ObjectNode toJson() {
        return HfConfigJson.writeModelConfig(this);
    }

    /** Whether the q/k/v projections have a bias: Qwen2 always, the others never (o_proj never has one). */
    public boolean qkvBias() {
        return architecture == Architecture.QWEN2;
    }

    /** Whether each head of q and k goes through its own RMSNorm ({@code q_norm}, {@code k_norm}) before RoPE. */
    public boolean qkNorm() {
        return architecture == Architecture.QWEN3 || architecture == Architecture.GEMMA3
                || architecture == Architecture.QWEN3_MOE || architecture == Architecture.OLMOE;
    }

    /**
     * Elements each q norm weight spans: one head (Qwen3, Gemma 3, Qwen3-MoE) or the whole q projection (OLMoE, whose
     * {@code q_norm} is {@code [Hq·D]} and normalises each row's queries together).
     */
    public int qNormSize() {
        return architecture == Architecture.OLMOE ? qSize() : headDim;
    }

    /** Elements each k norm weight spans: one head, or the whole k projection (OLMoE). */
    public int kNormSize() {
        return architecture == Architecture.OLMOE ? kvSize() : headDim;
    }

    /**
     * Gemma 3's layer: the attention output and the MLP output are each normalised ({@code post_attention_layernorm},
     * {@code post_feedforward_layernorm}) before they join the residual stream, and {@code pre_feedforward_layernorm}
     * is the norm before the MLP.
     */
    public boolean sandwichNorms() {
        return architecture == Architecture.GEMMA3;
    }

    /** The MLP's gate activation: GELU with the tanh approximation for Gemma 3, SiLU for the others. */
    public boolean geluTanhMlp() {
        return architecture == Architecture.GEMMA3;
    }

    /** Factor on the embeddings before the first layer: sqrt(hidden) rounded to fp32 for Gemma 3, else 1. */
    public float embeddingScale() {
        return architecture == Architecture.GEMMA3 ? (float) Math.sqrt(hiddenSize) : 1f;
    }

    /**
     * What the checkpoint's RMSNorm weights are offset by: Gemma 3 stores {@code w} and scales by {@code 1 + w}, so the
     * weights are loaded as {@code 1 + w}; 0 for the others.
     */
    public float normWeightOffset() {
        return architecture == Architecture.GEMMA3 ? 1f : 0f;
    }

    /** Whether the checkpoint stores q/k/v as one {@code qkv_proj} and gate/up as one {@code gate_up_proj} (Phi-3). */
    public boolean fusedCheckpointProjections() {
        return architecture == Architecture.PHI3;
    }

    /**
     * The softmax scale of attention scores: 1/sqrt(query_pre_attn_scalar) when given, 1/sqrt(qk_nope_head_dim +
     * qk_rope_head_dim) under latent attention, else 1/sqrt(head_dim).
     */
    public double attentionScale() {
        if (latentAttention.isPresent()) {
            return 1.0 / Math.sqrt(latentAttention.get().qkHeadDim());
        }
        return 1.0 / Math.sqrt(queryPreAttnScalar > 0 ? queryPreAttnScalar : headDim);
    }

    /** Values one token stores per layer in the KV cache: K and V of every KV head, or the latent and its rope part. */
    public int kvValuesPerToken() {
        return latentAttention.map(LatentAttention::latentDim).orElse(2 * kvSize());
    }

    /** Hq·D: width of the query projection output. */
    public int qSize() {
        return numHeads * headDim;
    }

    /** Hkv·D: width of each of the key and value projection outputs. */
    public int kvSize() {
        return numKvHeads * headDim;
    }

    /** (Hq + 2·Hkv)·D: rows of the fused q/k/v weight. */
    public int qkvRows() {
        return qSize() + 2 * kvSize();
    }

    /** Dims of each head that RoPE rotates. */
    public int rotaryDim() {
        return (int) (headDim * partialRotaryFactor);
    }

    /**
     * RoPE as the device ops take it: half-split (NeoX) pairs, as Hugging Face Llama rotates; neighbouring pairs under
     * latent attention, as DeepSeek-V2 rotates each pair as one complex number.
     */
    public RopeParams ropeParams() {
        boolean interleave = latentAttention.isPresent();
        return switch (ropeScaling.kind()) {
            case NONE -> new RopeParams(rotaryDim(), interleave, ropeTheta, 1.0, false, 0, 0, 0);
            case LINEAR -> new RopeParams(rotaryDim(), interleave, ropeTheta, ropeScaling.factor(), false, 0, 0, 0);
            case LLAMA3 -> new RopeParams(rotaryDim(), interleave, ropeTheta, ropeScaling.factor(), true,
                    ropeScaling.lowFreqFactor(), ropeScaling.highFreqFactor(), ropeScaling.originalMaxPositions());
        };
    }

    /** The attention window of {@code layer} in tokens, or 0 when the layer attends to the whole context. */
    public int attentionWindow(int layer) {
        if (!windowedLayers.isEmpty()) {
            return windowedLayers.get(layer) ? slidingWindow : 0;
        }
        return layer >= firstSlidingWindowLayer ? slidingWindow : 0;
    }

    /** RoPE of {@code layer}: windowed layers of a model with a local RoPE base rotate with it, unscaled. */
    public RopeParams ropeParams(int layer) {
        return localRopeTheta > 0 && attentionWindow(layer) > 0 ? RopeParams.standard(rotaryDim(), localRopeTheta)
                : ropeParams();
    }

    public Builder toBuilder() {
        return new Builder(this);
    }

    /**
     * A builder for configs made in code (random models, tests). Required: hidden, intermediate, layers, heads,
     * max positions, vocab. Defaults: kv heads = heads, head dim = hidden / heads, eps 1e-5, theta 10000, no rope
     * scaling, untied, no sliding window, no bos/eos, BF16, no FP8 weights, no experts.
     */
    public static Builder builder(Architecture architecture) {
        return new Builder(architecture);
    }

    /** Mutable builder; {@link #build} validates. */
    public static final class Builder {
        private Architecture architecture;
        private int hiddenSize;
        private int intermediateSize;
        private int numLayers;
        private int numHeads;
        private int numKvHeads;
        private int headDim;
        private double rmsNormEps = 1e-5;
        private double ropeTheta = 10_000;
        private RopeScaling ropeScaling = RopeScaling.none();
        private double partialRotaryFactor = 1;
        private int maxPositionEmbeddings;
        private int vocabSize;
        private boolean tieWordEmbeddings;
        private int slidingWindow;
        private int firstSlidingWindowLayer;
        private List<Boolean> windowedLayers = List.of();
        private OptionalInt bosTokenId = OptionalInt.empty();
        private List<Integer> eosTokenIds = List.of();
        private DType dtype = DType.BF16;
        private double localRopeTheta;
        private double queryPreAttnScalar;
        private Fp8Quantization quantization;
        private MoeConfig moe;
        private LatentAttention latentAttention;

        private Builder(Architecture architecture) {
            this.architecture = architecture;
        }

        private Builder(ModelConfig c) {
            architecture = c.architecture;
            hiddenSize = c.hiddenSize;
            intermediateSize = c.intermediateSize;
            numLayers = c.numLayers;
            numHeads = c.numHeads;
            numKvHeads = c.numKvHeads;
            headDim = c.headDim;
            rmsNormEps = c.rmsNormEps;
            ropeTheta = c.ropeTheta;
            ropeScaling = c.ropeScaling;
            partialRotaryFactor = c.partialRotaryFactor;
            maxPositionEmbeddings = c.maxPositionEmbeddings;
            vocabSize = c.vocabSize;
            tieWordEmbeddings = c.tieWordEmbeddings;
            slidingWindow = c.slidingWindow;
            firstSlidingWindowLayer = c.firstSlidingWindowLayer;
            windowedLayers = c.windowedLayers;
            bosTokenId = c.bosTokenId;
            eosTokenIds = c.eosTokenIds;
            dtype = c.dtype;
            localRopeTheta = c.localRopeTheta;
            queryPreAttnScalar = c.queryPreAttnScalar;
            quantization = c.quantization.orElse(null);
            moe = c.moe.orElse(null);
            latentAttention = c.latentAttention.orElse(null);
        }

        public Builder architecture(Architecture v) { architecture = v; return this; }
        public Builder hiddenSize(int v) { hiddenSize = v; return this; }
        public Builder intermediateSize(int v) { intermediateSize = v; return this; }
        public Builder numLayers(int v) { numLayers = v; return this; }
        public Builder numHeads(int v) { numHeads = v; return this; }
        /** 0 = same as the number of heads. */
        public Builder numKvHeads(int v) { numKvHeads = v; return this; }
        /** 0 = hidden size / heads. */
        public Builder headDim(int v) { headDim = v; return this; }
        public Builder rmsNormEps(double v) { rmsNormEps = v; return this; }
        public Builder ropeTheta(double v) { ropeTheta = v; return this; }
        public Builder ropeScaling(RopeScaling v) { ropeScaling = v; return this; }
        public Builder partialRotaryFactor(double v) { partialRotaryFactor = v; return this; }
        public Builder maxPositionEmbeddings(int v) { maxPositionEmbeddings = v; return this; }
        public Builder vocabSize(int v) { vocabSize = v; return this; }
        public Builder tieWordEmbeddings(boolean v) { tieWordEmbeddings = v; return this; }
        /** Window in tokens (0 = none) for layers {@code firstLayer} and up. */
        public Builder slidingWindow(int window, int firstLayer) { slidingWindow = window; firstSlidingWindowLayer = firstLayer; return this; }
        /** One flag a layer, true for a windowed one ({@code layer_types}); empty = from the first windowed layer on. */
        public Builder windowedLayers(List<Boolean> v) { windowedLayers = v; return this; }
        public Builder localRopeTheta(double v) { localRopeTheta = v; return this; }
        public Builder queryPreAttnScalar(double v) { queryPreAttnScalar = v; return this; }
        public Builder bosTokenId(OptionalInt v) { bosTokenId = v; return this; }
        public Builder bosTokenId(int v) { return bosTokenId(OptionalInt.of(v)); }
        public Builder eosTokenIds(List<Integer> v) { eosTokenIds = v; return this; }
        public Builder eosTokenId(int v) { return eosTokenIds(List.of(v)); }
        public Builder dtype(DType v) { dtype = v; return this; }
        /** How the checkpoint stores FP8 weights; null = it stores none. */
        public Builder quantization(Fp8Quantization v) { quantization = v; return this; }
        /** The routed experts of a mixture-of-experts architecture; null = none. */
        public Builder moe(MoeConfig v) { moe = v; return this; }
        /** DeepSeek-V2's latent attention; null = none. */
        public Builder latentAttention(LatentAttention v) { latentAttention = v; return this; }

        /** @throws ModelFormatException naming the first invalid value (by its config.json key) */
        public ModelConfig build() {
            if (numHeads <= 0) {
                throw new ModelFormatException("num_attention_heads must be > 0, got " + numHeads);
            }
            int kv = numKvHeads == 0 ? numHeads : numKvHeads;
            int hd = headDim;
            if (hd == 0) {
                if (hiddenSize % numHeads != 0) {
                    throw new ModelFormatException("hidden_size " + hiddenSize + " is not a multiple of num_attention_heads "
                            + numHeads + " and head_dim is not given");
                }
                hd = hiddenSize / numHeads;
            }
            return new ModelConfig(architecture, hiddenSize, intermediateSize, numLayers, numHeads, kv, hd, rmsNormEps,
                    ropeTheta, ropeScaling, partialRotaryFactor, maxPositionEmbeddings, vocabSize, tieWordEmbeddings,
                    slidingWindow, firstSlidingWindowLayer, windowedLayers, bosTokenId, eosTokenIds, dtype, localRopeTheta,
                    queryPreAttnScalar, Optional.ofNullable(quantization), Optional.ofNullable(moe),
                    Optional.ofNullable(latentAttention));
        }
    }
}
