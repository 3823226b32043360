package org.mstar.jobs;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import org.mstar.device.DType;
import org.mstar.device.Devices;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.engine.LlamaEngineLoader;
import org.mstar.flink.DeviceTurn;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.resources.kv.KvShelf;
import org.mstar.model.llama.RandomWeights;

/**
 * The pipeline benchmark's devices and weights, made once per process and shared by the bare engine and by every
 * generate task (also after a restart), like the operator's own process-wide cache. Random weights are made on the
 * device itself: writing an 8B-parameter checkpoint to disk and reading it back would take longer than the run.
 */
final class BenchModels {
    /** Weights on a device, with how long making them took. */
    record Loaded(DeviceTurn turn, LlamaWeights weights, long loadMillis) {}

    private static final Map<String, DeviceTurn> DEVICES = new HashMap<>();
    /** Where the KV caches of this process lend pages to each other, on one device or across devices. */
    private static final KvShelf SHELF = new KvShelf();
    private static final Map<String, Loaded> MODELS = new HashMap<>();
    private static int loads;

    private BenchModels() {}

    /**
     * @param modelDir a model folder: its config.json always, its safetensors unless {@code randomSeed} is set
     * @param randomSeed random weights of the folder's geometry with this seed, or null to load the safetensors
     */
    static synchronized Loaded get(Path modelDir, Long randomSeed, String deviceName) {
        // random weights are those of a geometry and a seed, wherever the config lies (the SQL side's model folder
        // is a copy with a tokenizer added)
        String key = (randomSeed == null ? modelDir.toAbsolutePath().normalize() : configText(modelDir)) + "#"
                + randomSeed + "@" + deviceName;
        Loaded loaded = MODELS.get(key);
        if (loaded == null) {
            DeviceTurn turn = DEVICES.computeIfAbsent(deviceName, n -> new DeviceTurn(Devices.open(n)));
            long start = System.nanoTime();
            LlamaWeights weights = turn.call(() -> randomSeed == null
                    ? LlamaEngineLoader.loadWeights(modelDir, turn.device())
                    : RandomWeights.create(config(modelDir), turn.device(),
                            turn.device().isCuda() ? DType.BF16 : DType.F32, randomSeed));
            turn.run(() -> turn.device().synchronize());
            loaded = new Loaded(turn, weights, (System.nanoTime() - start) / 1_000_000);
            MODELS.put(key, loaded);
            loads++;
        }
        return loaded;
    }

    /** Where the KV caches of this process lend pages to each other (hand-offs by handle). */
    static KvShelf shelf() {
        return SHELF;
    }

    /** How many times weights were made or read in this process. */
    static synchronized int loads() {
        return loads;
    }

    /** Device memory the process holds (driver view), or -1 on the CPU; call inside the device's turn. */
    static long memoryInUse(DeviceTurn turn) {
        return turn.device() instanceof CudaDevice cuda ? cuda.memoryInUse() : -1;
    }

    private static String configText(Path modelDir) {
        try {
            return Files.readString(modelDir.resolve(ModelConfig.FILE_NAME));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static ModelConfig config(Path modelDir) {
        try {
            return ModelConfig.load(modelDir);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
