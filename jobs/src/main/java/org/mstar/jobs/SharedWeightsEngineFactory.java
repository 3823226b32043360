package org.mstar.jobs;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;
import org.apache.flink.configuration.ReadableConfig;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.EngineSizing;
import org.mstar.engine.ForwardingEngine;
import org.mstar.engine.GenerationEngine;
import org.mstar.flink.DeviceTurn;
import org.mstar.flink.EngineFactory;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.LlamaEngineOptions;
import org.mstar.resources.KVCacheDType;

/**
 * The serving benchmark's engines ({@link BenchEngineFactory}: over {@link BenchModels}' one copy of the weights,
 * sized as {@code serve} sizes them) for a job that names its factory by class, as {@code ML_PREDICT}'s
 * {@code 'engine.factory'} does. So the SQL side runs the DataStream side's engine over the same weights instead of
 * loading a second copy, which would also leave its engine less memory. A folder without safetensors means random
 * weights of its config's geometry. Each engine gives its cached device memory back at close, so that the next job's
 * engine is sized from the same free memory.
 */
public final class SharedWeightsEngineFactory implements EngineFactory {
    private static final long serialVersionUID = 1L;

    private final String modelDir;
    private final Long randomSeed;
    private final BenchEngineFactory engines;

    /**
     * Reads {@code mstar.model.dir}, {@code mstar.kv.max-seq-len}, {@code mstar.kv.cache-dtype} and the sizing options
     * that are set.
     */
    public SharedWeightsEngineFactory(ReadableConfig config) {
        Path dir = Path.of(config.getOptional(GenerateOptions.MODEL_DIR).orElseThrow(() -> new IllegalArgumentException(
                "no '" + GenerateOptions.MODEL_DIR.key() + "'")));
        this.modelDir = dir.toString();
        this.randomSeed = hasSafetensors(dir) ? null : ModelSource.RANDOM_SEED;
        EngineSizing.Request sizing = EngineSizing.Request.of(
                config.getOptional(LlamaEngineOptions.MAX_BATCH_ROWS).orElse(null),
                config.getOptional(LlamaEngineOptions.TOKEN_BUDGET).orElse(null),
                config.getOptional(LlamaEngineOptions.PAGES).orElse(null),
                config.get(LlamaEngineOptions.GPU_MEMORY_FRACTION));
        EngineOptions defaults = EngineOptions.cpuDefaults(config.get(LlamaEngineOptions.MAX_SEQ_LEN));
        this.engines = new BenchEngineFactory(dir, randomSeed, defaults.withKvCache(defaults.kvCache().toBuilder()
                .cacheDType(KVCacheDType.parse(config.get(LlamaEngineOptions.KV_CACHE_DTYPE))).build()), sizing);
    }

    @Override
    public GenerationEngine create(String device, int subtaskIndex) {
        DeviceTurn turn = BenchModels.get(Path.of(modelDir), randomSeed, device).turn();
        return new ForwardingEngine(engines.create(device, subtaskIndex)) {
            @Override
            public void close() {
                super.close();
                turn.run(() -> turn.device().releaseCachedMemory());
            }
        };
    }

    private static boolean hasSafetensors(Path dir) {
        try (Stream<Path> files = Files.list(dir)) {
            return files.anyMatch(f -> f.getFileName().toString().endsWith(".safetensors"));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list the model folder " + dir, e);
        }
    }
}
