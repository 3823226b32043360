package org.mstar.flink;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import org.mstar.device.Devices;
import org.mstar.engine.HybridEngineLoader;
import org.mstar.engine.LlamaEngineLoader;
import org.mstar.model.WeightQuantization;
import org.mstar.model.mamba.HybridWeights;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.resources.kv.KvBytesServer;
import org.mstar.resources.kv.KvShelf;

/**
 * Devices and model weights of this TaskManager process, each created once: the subtasks on one device
 * share its weights, and a task restarted in the same process finds them already loaded. Nothing is
 * unloaded: a serving TaskManager keeps its models for its lifetime. Reuse across restarts needs these
 * classes on the TaskManager's own classpath (Flink's lib/, as in the Docker image); a per-job class
 * loader starts afresh after a restart.
 *
 * <p>A device runs one stream of work, so engines sharing a device take turns through its {@link DeviceTurn}.
 */
final class SharedModels {
    /** A device's turn and the weights loaded on the device. */
    record Loaded(DeviceTurn turn, LlamaWeights weights) {}

    /** A device's turn and the weights of a recurrent (Mamba2, Bamba) model loaded on the device. */
    record LoadedHybrid(DeviceTurn turn, HybridWeights weights) {}

    private static final Map<String, DeviceTurn> DEVICES = new HashMap<>();
    private static final Map<String, LlamaWeights> WEIGHTS = new HashMap<>();
    private static final Map<String, HybridWeights> HYBRID_WEIGHTS = new HashMap<>();
    /** Where the KV caches of this process lend pages to each other, on one device or across devices. */
    private static final KvShelf SHELF = new KvShelf();
    private static KvBytesServer kvBytes;
    private static int loads;

    private SharedModels() {}

    /**
     * The weights of {@code modelDir} on {@code deviceName} ({@code cpu} or {@code cuda:N}) with the projections kept
     * as {@code quantization} says, loading them once.
     */
    static synchronized Loaded get(Path modelDir, String deviceName, WeightQuantization quantization) {
        DeviceTurn turn = turn(deviceName);
        String key = modelDir.toAbsolutePath().normalize() + "@" + deviceName
                + (quantization == WeightQuantization.NONE ? "" : "/" + quantization.flag());
        LlamaWeights weights = WEIGHTS.get(key);
        if (weights == null) {
            weights = turn.call(() -> WeightLoading.logged(modelDir, deviceName,
                    progress -> LlamaEngineLoader.loadWeights(modelDir, turn.device(), quantization, progress)));
            WEIGHTS.put(key, weights);
            loads++;
        }
        return new Loaded(turn, weights);
    }

    /** The weights of the Mamba2 or Bamba model in {@code modelDir} on {@code deviceName}, loading them once. */
    static synchronized LoadedHybrid hybrid(Path modelDir, String deviceName) {
        DeviceTurn turn = turn(deviceName);
        String key = modelDir.toAbsolutePath().normalize() + "@" + deviceName;
        HybridWeights weights = HYBRID_WEIGHTS.get(key);
        if (weights == null) {
            weights = turn.call(() -> WeightLoading.logged(modelDir, deviceName,
                    progress -> HybridEngineLoader.loadWeights(modelDir, turn.device())));
            HYBRID_WEIGHTS.put(key, weights);
            loads++;
        }
        return new LoadedHybrid(turn, weights);
    }

    /** The turn of device {@code deviceName}, opened once: for engines that load their own weights (Whisper). */
    static synchronized DeviceTurn turn(String deviceName) {
        return DEVICES.computeIfAbsent(deviceName, n -> new DeviceTurn(Devices.open(n)));
    }

    /** Where the KV caches of this process lend pages to each other (hand-offs by handle). */
    static KvShelf shelf() {
        return SHELF;
    }

    /**
     * Where this process's prefill engines offer hand-offs' KV bytes to decode engines in other processes, started on
     * the first call (listening on {@code host}, any free port); later calls get the same server.
     */
    static synchronized KvBytesServer kvBytesServer(String host, long retainedBytes) {
        if (kvBytes == null) {
            try {
                kvBytes = KvBytesServer.start(host, retainedBytes);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot listen for KV hand-off pulls on " + host, e);
            }
        }
        return kvBytes;
    }

    /** How many times weights were read from disk in this process (tests check reuse with it). */
    static synchronized int loads() {
        return loads;
    }
}
