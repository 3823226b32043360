package org.mstar.engine;

import java.util.List;
import java.util.OptionalInt;
import java.util.function.Function;
import org.mstar.device.DType;
import org.mstar.engine.whisper.WhisperEngineOptions;
import org.mstar.engine.whisper.WhisperRunner;
import org.mstar.model.GenerationConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.tokenizer.TextTokenizer;
import org.mstar.model.whisper.WhisperConfig;
import org.mstar.model.whisper.WhisperModel;

/**
 * Serves a {@link WhisperModel}: speech in ({@link GenerationRequest#audio()}), text out, many requests batched per
 * step — the engine loop ({@link EngineCore}: priority, preemption, fault isolation, decode graphs) over the
 * model's {@link WhisperRunner}, which documents the decoding. This class is what loaders, operators and
 * harnesses hold.
 *
 * <p>Deterministic: tokens depend only on the audio, the options, the sampling config and the model, so
 * {@link #resume} continues exactly, and a preempted request recomputes its window to the same tokens; earlier
 * tokens are fed back with each window's prompt, not drawn again.
 */
public final class WhisperEngine extends CoreFacade {

    /**
     * @param tokenizer null when no text is wanted (token ids only)
     * @param melFeatures one window's samples (at most 30 s at 16 kHz) → its log-mel features, frames-major
     *     {@code [melFrames, mels]}, padded to the whole window
     * @param kvDType element type of the KV pages
     */
    public WhisperEngine(WhisperModel model, TextTokenizer tokenizer, Function<float[], float[]> melFeatures,
                         WhisperEngineOptions options, DType kvDType) {
        super(new EngineCore(new WhisperRunner(model, melFeatures, options.maxWindowTokens()), tokenizer,
                new GenerationConfig(OptionalInt.empty(), List.of(model.config().eosTokenId())),
                engineOptions(model.config(), options), kvDType));
    }

    /**
     * A step takes every row's whole window prompt (at most the decoder's positions), unchunked: the step that
     * encodes a window feeds its prompt. A token may end a window, whose KV is then freed, so no step is launched
     * before the one before it is accepted.
     */
    private static EngineOptions engineOptions(WhisperConfig config, WhisperEngineOptions o) {
        KvCacheOptions kv = KvCacheOptions.builder().maxNumPages(o.pages()).pageSize(o.pageSize())
                .maxSeqLen(config.maxTargetPositions()).build();
        return new EngineOptions(o.maxBatchRows(), o.maxBatchRows() * config.maxTargetPositions(), kv,
                o.decodeGraphs()).withLaunchAhead(false);
    }
}
