package org.mstar.flink;

import java.nio.file.Path;
import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.runtime.execution.SuppressRestartsException;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.EngineRole;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.HybridEngineLoader;
import org.mstar.model.WeightQuantization;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.mamba.StateSnapshots;
import org.mstar.resources.KVCacheDType;

/**
 * Builds a {@code HybridEngine} (Mamba2 and Bamba checkpoints in Hugging Face layout, whose config.json names
 * {@code Mamba2ForCausalLM} or {@code BambaForCausalLM}) on each subtask's device, from {@link GenerateOptions#MODEL_DIR}
 * with {@link LlamaEngineOptions#MAX_BATCH_ROWS}, {@link LlamaEngineOptions#TOKEN_BUDGET},
 * {@link LlamaEngineOptions#MAX_SEQ_LEN}, {@link LlamaEngineOptions#PAGES}, {@link LlamaEngineOptions#PAGE_SIZE},
 * {@link LlamaEngineOptions#PREFIX_CACHE} (recurrent state snapshots every 128 prompt tokens beside the KV pages) and
 * {@link LlamaEngineOptions#DECODE_GRAPHS}. {@link LlamaEngineFactory}, the default factory, hands such a folder to
 * this one. The engines on one device share one copy of the weights per TaskManager process, as the Llama families'
 * do ({@link SharedModels}); each keeps a recurrent state per request; a restore resumes
 * each request by recomputing that state from its prompt and the tokens it had emitted. These models have no host
 * offload, FP8 weights, adapters or disaggregated roles: the factory refuses them by name.
 */
@PublicEvolving
public final class HybridEngineFactory implements EngineFactory {
    private static final long serialVersionUID = 1L;

    private final String modelDir;
    private final int maxBatchRows;
    private final int tokenBudget;
    private final int maxSeqLen;
    private final int pages;
    private final int pageSize;
    private final boolean prefixCache;
    private final boolean decodeGraphs;

    /** @throws IllegalArgumentException when the model folder is not set or an option these models lack is asked */
    public HybridEngineFactory(ReadableConfig config) {
        this.modelDir = config.getOptional(GenerateOptions.MODEL_DIR).orElseThrow(() -> new IllegalArgumentException(
                "No model: set '" + GenerateOptions.MODEL_DIR.key() + "' to a Mamba2 or Bamba model folder"
                        + " (config.json, safetensors, tokenizer.json)."));
        this.maxBatchRows = config.get(LlamaEngineOptions.MAX_BATCH_ROWS);
        this.tokenBudget = config.get(LlamaEngineOptions.TOKEN_BUDGET);
        this.maxSeqLen = config.get(LlamaEngineOptions.MAX_SEQ_LEN);
        this.pages = config.get(LlamaEngineOptions.PAGES);
        this.pageSize = config.get(LlamaEngineOptions.PAGE_SIZE);
        this.prefixCache = config.get(LlamaEngineOptions.PREFIX_CACHE);
        this.decodeGraphs = config.get(LlamaEngineOptions.DECODE_GRAPHS);
        refuse(config.get(LlamaEngineOptions.CPU_OFFLOAD_PAGES) > 0, LlamaEngineOptions.CPU_OFFLOAD_PAGES.key());
        refuse(config.get(LlamaEngineOptions.WINDOWED_LAYER_PAGES) > 0, LlamaEngineOptions.WINDOWED_LAYER_PAGES.key());
        refuse(WeightQuantization.parse(config.get(LlamaEngineOptions.QUANTIZATION)) != WeightQuantization.NONE,
                LlamaEngineOptions.QUANTIZATION.key() + "=" + config.get(LlamaEngineOptions.QUANTIZATION));
        refuse(KVCacheDType.parse(config.get(LlamaEngineOptions.KV_CACHE_DTYPE)) != KVCacheDType.AUTO,
                LlamaEngineOptions.KV_CACHE_DTYPE.key() + "=" + config.get(LlamaEngineOptions.KV_CACHE_DTYPE));
        refuse(config.getOptional(LlamaEngineOptions.ADAPTERS_DIR).isPresent(),
                "LoRA adapters (" + LlamaEngineOptions.ADAPTERS_DIR.key() + ")");
        refuse(config.get(DisaggregationOptions.ENGINE_ROLE) != EngineRole.COLOCATED
                || config.get(DisaggregationOptions.ENABLED), "disaggregated prefill and decode");
    }

    private void refuse(boolean asked, String what) {
        if (asked) {
            throw new IllegalArgumentException("Model " + modelDir + " keeps a recurrent state per request and is"
                    + " served without " + what + ".");
        }
    }

    /**
     * @throws SuppressRestartsException when the device cannot run the model at all: a restart would fail the same
     *     way
     */
    @Override
    public GenerationEngine create(String device, int subtaskIndex) {
        EngineOptions options = new EngineOptions(maxBatchRows, tokenBudget, KvCacheOptions.builder()
                .maxSeqLen(maxSeqLen).maxNumPages(pages).pageSize(pageSize).prefixCache(prefixCache).build());
        try {
            SharedModels.LoadedHybrid shared = SharedModels.hybrid(Path.of(modelDir), device);
            DeviceTurn turn = shared.turn();
            // graphs only pay where launches cost host time; on the CPU a replay just re-runs the ops
            EngineOptions onDevice = options.withDecodeGraphs(decodeGraphs && turn.device().isCuda());
            return turn.guard(turn.call(() -> HybridEngineLoader.over(Path.of(modelDir), shared.weights(), onDevice,
                    StateSnapshots.defaults(onDevice.maxBatchRows()))));
        } catch (IllegalArgumentException e) {
            throw new SuppressRestartsException(new IllegalArgumentException(
                    "Model " + modelDir + " cannot be served on " + device + ": " + e.getMessage(), e));
        }
    }
}
