package org.mstar.flink;

import java.nio.file.Path;
import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.runtime.execution.SuppressRestartsException;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.WhisperEngineLoader;
import org.mstar.engine.whisper.WhisperEngineOptions;
import org.mstar.resources.KVCacheDType;

/**
 * Builds a {@code WhisperEngine} (speech to text; a Hugging Face folder whose config.json says
 * {@code model_type: whisper}) on each subtask's device, from {@link GenerateOptions#MODEL_DIR} with
 * {@link LlamaEngineOptions#MAX_BATCH_ROWS}, {@link LlamaEngineOptions#PAGES} and {@link LlamaEngineOptions#PAGE_SIZE}.
 * {@link LlamaEngineFactory}, the default factory, hands a Whisper folder to this one. Each engine loads its own
 * copy of the weights.
 */
@PublicEvolving
public final class WhisperEngineFactory implements EngineFactory {
    private static final long serialVersionUID = 1L;

    private final String modelDir;
    private final WhisperEngineOptions options;
    private final boolean decodeGraphs;

    /** @throws IllegalArgumentException when {@link GenerateOptions#MODEL_DIR} is not set or the sizes are invalid */
    public WhisperEngineFactory(ReadableConfig config) {
        this.modelDir = config.getOptional(GenerateOptions.MODEL_DIR).orElseThrow(() -> new IllegalArgumentException(
                "No model: set '" + GenerateOptions.MODEL_DIR.key() + "' to a Whisper model folder (config.json,"
                        + " generation_config.json, safetensors, tokenizer.json)."));
        this.options = new WhisperEngineOptions(config.get(LlamaEngineOptions.MAX_BATCH_ROWS),
                config.get(LlamaEngineOptions.PAGES), config.get(LlamaEngineOptions.PAGE_SIZE));
        this.decodeGraphs = config.get(LlamaEngineOptions.DECODE_GRAPHS);
        if (KVCacheDType.parse(config.get(LlamaEngineOptions.KV_CACHE_DTYPE)) != KVCacheDType.AUTO) {
            throw new IllegalArgumentException("Model " + modelDir + " is served with KV pages in its own dtype: '"
                    + LlamaEngineOptions.KV_CACHE_DTYPE.key() + "' = "
                    + config.get(LlamaEngineOptions.KV_CACHE_DTYPE) + " covers the Llama family only.");
        }
    }

    /**
     * @throws SuppressRestartsException when the device cannot run the model at all: a restart would fail the same
     *     way
     */
    @Override
    public GenerationEngine create(String device, int subtaskIndex) {
        try {
            DeviceTurn turn = SharedModels.turn(device);
            return turn.guard(turn.call(() -> WeightLoading.logged(Path.of(modelDir), device,
                    progress -> WhisperEngineLoader.load(Path.of(modelDir), turn.device(), null,
                            options.withDecodeGraphs(decodeGraphs && turn.device().isCuda()), progress))));
        } catch (IllegalArgumentException e) {
            throw new SuppressRestartsException(new IllegalArgumentException(
                    "Model " + modelDir + " cannot be served on " + device + ": " + e.getMessage(), e));
        }
    }
}
