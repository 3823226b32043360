package org.mstar.flink;

import java.nio.file.Path;
import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.configuration.ReadableConfig;
import org.mstar.device.Device;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.EngineStats;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.LlamaEngineLoader;
import org.mstar.engine.StepResult;
import org.mstar.model.llama.KvCacheOptions;

/**
 * Builds a {@code LlamaEngine} (Llama, Qwen2, Mistral checkpoints in Hugging Face layout) on each subtask's device,
 * from the model folder {@link GenerateOptions#MODEL_DIR} and the knobs of {@link LlamaEngineOptions}. The default
 * {@link GenerateOptions#ENGINE_FACTORY}.
 */
@PublicEvolving
public final class LlamaEngineFactory implements EngineFactory {
    private static final long serialVersionUID = 1L;

    private final String modelDir;
    private final int maxBatchRows;
    private final int tokenBudget;
    private final int maxSeqLen;
    private final int pages;
    private final int pageSize;
    private final int cpuOffloadPages;
    private final boolean prefixCache;

    /** @throws IllegalArgumentException when {@link GenerateOptions#MODEL_DIR} is not set */
    public LlamaEngineFactory(ReadableConfig config) {
        this.modelDir = config.getOptional(GenerateOptions.MODEL_DIR).orElseThrow(() -> new IllegalArgumentException(
                "No model: set '" + GenerateOptions.MODEL_DIR.key() + "' to a model folder (config.json, safetensors,"
                        + " tokenizer.json)."));
        this.maxBatchRows = config.get(LlamaEngineOptions.MAX_BATCH_ROWS);
        this.tokenBudget = config.get(LlamaEngineOptions.TOKEN_BUDGET);
        this.maxSeqLen = config.get(LlamaEngineOptions.MAX_SEQ_LEN);
        this.pages = config.get(LlamaEngineOptions.PAGES);
        this.pageSize = config.get(LlamaEngineOptions.PAGE_SIZE);
        this.cpuOffloadPages = config.get(LlamaEngineOptions.CPU_OFFLOAD_PAGES);
        this.prefixCache = config.get(LlamaEngineOptions.PREFIX_CACHE);
        options(); // rejects invalid knobs where the job is built, not on the TaskManagers
    }

    @Override
    public GenerationEngine create(String device, int subtaskIndex) {
        Device d = device.equals("cpu") ? new CpuDevice() : new CudaDevice(Integer.parseInt(device.substring(5)));
        try {
            return new DeviceOwningEngine(LlamaEngineLoader.load(Path.of(modelDir), d, options()), d);
        } catch (RuntimeException e) {
            d.close();
            throw e;
        }
    }

    private EngineOptions options() {
        return new EngineOptions(maxBatchRows, tokenBudget,
                new KvCacheOptions(maxSeqLen, pages, pageSize, cpuOffloadPages, prefixCache));
    }

    /** The engine, and the device it runs on, which closes after it. */
    private record DeviceOwningEngine(GenerationEngine engine, Device device) implements GenerationEngine {
        @Override
        public void submit(GenerationRequest request) {
            engine.submit(request);
        }

        @Override
        public void resume(GenerationRequest request, int[] generated) {
            engine.resume(request, generated);
        }

        @Override
        public StepResult step() {
            return engine.step();
        }

        @Override
        public boolean hasWork() {
            return engine.hasWork();
        }

        @Override
        public void remove(String requestId) {
            engine.remove(requestId);
        }

        @Override
        public int waiting() {
            return engine.waiting();
        }

        @Override
        public EngineStats stats() {
            return engine.stats();
        }

        @Override
        public void close() {
            try {
                engine.close();
            } finally {
                device.close();
            }
        }
    }
}
