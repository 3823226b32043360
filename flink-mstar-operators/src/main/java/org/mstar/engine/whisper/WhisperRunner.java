package org.mstar.engine.whisper;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.ModelRequest;
import org.mstar.engine.ModelRunner;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.whisper.WhisperConfig;
import org.mstar.model.whisper.WhisperModel;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PublishedInfoCodec;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.Resource;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.Segment;
import org.mstar.resources.SubmoduleStep;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.sampler.SamplerResource;

/**
 * Whisper ({@link WhisperModel}) as the engine loop's model: speech in ({@link GenerationRequest#audio()}), text
 * out. Each request is a {@link Transcription}, one sequence per 30-second window; the step that starts a window
 * encodes it (the windows of a step packed through ragged attention) and writes its cross-attention context,
 * which takes {@link #statePages} beside the decoder's tokens. Decoding follows transformers' Whisper generation
 * (see {@link Transcription}); without a sampling config a request decodes greedily, as Whisper does.
 */
public final class WhisperRunner implements ModelRunner {
    private static final ResourceKeys KEYS = new ResourceKeys(WhisperModel.NODE, WhisperModel.WALK, WhisperModel.KV,
            WhisperModel.SAMPLER, WhisperModel.POSITION, null);

    private final WhisperModel model;
    private final WhisperConfig config;
    private final Function<float[], float[]> melFeatures;
    private final WindowRules rules;

    /**
     * @param melFeatures one window's samples (at most 30 s at 16 kHz) → its log-mel features, frames-major
     *     {@code [melFrames, mels]}, padded to the whole window
     * @param maxWindowTokens tokens one window may generate; 0: up to the decoder's last position
     */
    public WhisperRunner(WhisperModel model, Function<float[], float[]> melFeatures, int maxWindowTokens) {
        this.model = model;
        this.config = model.config();
        this.melFeatures = melFeatures;
        this.rules = WindowRules.of(config, maxWindowTokens);
    }

    @Override
    public ResourceKeys keys() {
        return KEYS;
    }

    /**
     * None: Whisper is served colocated only ({@code WhisperEngine} builds no prefill or decode role), since a
     * transcription's encoder context is model state of the request, which no resource publishes.
     */
    @Override
    public Map<String, PublishedInfoCodec<?>> handoffCodecs() {
        return Map.of();
    }

    @Override
    public Device device() {
        return model.device();
    }

    @Override
    public int vocabSize() {
        return config.vocabSize();
    }

    @Override
    public int maxPositions() {
        return config.maxTargetPositions();
    }

    @Override
    public long kvPageBytes(int pageSize, DType kvDType) {
        return 2L * config.decoderLayers() * config.decoderHeads() * config.decoderHeadDim() * pageSize
                * kvDType.bytes();
    }

    @Override
    public List<Object> identity() {
        return List.of(config);
    }

    /** @throws IllegalArgumentException when the pool cannot hold one request's window: its context and decoder */
    @Override
    public List<NodeResourceSpec> declareResources(KvCacheOptions kv, List<Integer> stopIds) {
        int pageSize = kv.pageSize();
        int window = statePages(pageSize) + ceilDiv(config.maxTargetPositions(), pageSize);
        if (window > kv.maxNumPages() - 1) {
            throw new IllegalArgumentException(kv.maxNumPages() + " KV pages of " + pageSize + " tokens cannot hold"
                    + " one request (a window's context and decoder need " + window + ")");
        }
        return model.declareResources(kv.maxNumPages(), pageSize, stopIds);
    }

    /** The encoder output's cross-attention K/V of one window, in the request's context stream. */
    @Override
    public int statePages(int pageSize) {
        return ceilDiv(config.encoderFrames(), pageSize);
    }

    private static int ceilDiv(int a, int b) {
        return (a + b - 1) / b;
    }

    @Override
    public int mainCacheWindow() {
        return 0;
    }

    @Override
    public void bind(Map<String, Resource> built) {
        model.bind(built);
    }

    @Override
    public KVManager kv() {
        return model.kv();
    }

    @Override
    public SamplerResource sampler() {
        return model.sampler();
    }

    /** Whisper decodes greedily by default. */
    @Override
    public SamplingReqConfig defaultSampling() {
        return SamplingReqConfig.greedy();
    }

    @Override
    public ModelRequest openRequest(GenerationRequest request, int[] generated) {
        if (request.audio() == null) {
            throw new RequestValidationException("audio", "a Whisper model transcribes audio; the request has none");
        }
        if (request.promptTokenIds() != null || request.promptText() != null || request.messages() != null) {
            throw new RequestValidationException("prompt", "a Whisper model takes audio, not a text prompt or messages");
        }
        if (request.constraint() != null) {
            throw new RequestValidationException("constraint", "structured output is not supported for transcription");
        }
        int language = rules.prompts().languageToken(request.audio().language());
        int task = rules.prompts().taskToken(request.audio().task());
        return new Transcription(request, rules, language, task, generated);
    }

    /** The sampler's seen set never takes Whisper's prompts: {@code promptTokens} is not used. */
    @Override
    public SubmoduleStep declareStep(List<Segment> segments, List<String> starting, Map<String, int[]> promptTokens,
                                     Set<String> sampledRids) {
        return model.declareStep(segments, starting, sampledRids);
    }

    /**
     * The windows that start are featurised side by side (independent host work), then encoded in the step;
     * {@code starting} are this runner's own requests ({@link #openRequest}).
     */
    @Override
    public Tensor forward(Tensor tokens, int[] outputRows, List<ModelRequest> starting) {
        List<float[]> mels = starting.stream().parallel()
                .map(t -> melFeatures.apply(((Transcription) t).windowSamples())).toList();
        return model.forward(mels, tokens, outputRows);
    }

    @Override
    public void forwardAllRows(Tensor tokens, Tensor logits, List<Tensor> held) {
        model.forwardAllRows(tokens, logits, held);
    }
}
