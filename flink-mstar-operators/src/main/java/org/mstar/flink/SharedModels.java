package org.mstar.flink;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;
import org.mstar.device.Device;
import org.mstar.device.Devices;
import org.mstar.engine.LlamaEngineLoader;
import org.mstar.model.llama.LlamaWeights;

/**
 * Devices and model weights of this TaskManager process, each created once: the subtasks on one device
 * share its weights, and a task restarted in the same process finds them already loaded. Nothing is
 * unloaded: a serving TaskManager keeps its models for its lifetime. Reuse across restarts needs these
 * classes on the TaskManager's own classpath (Flink's lib/, as in the Docker image); a per-job class
 * loader starts afresh after a restart.
 *
 * <p>A device runs one stream of work, so engines sharing a device take turns through its
 * {@link #lock}.
 */
final class SharedModels {
    /** A device, its turn-taking lock, and the weights loaded on it. */
    record Loaded(Device device, ReentrantLock lock, LlamaWeights weights) {}

    private static final Map<String, Device> DEVICES = new HashMap<>();
    private static final Map<String, ReentrantLock> LOCKS = new HashMap<>();
    private static final Map<String, LlamaWeights> WEIGHTS = new HashMap<>();
    private static int loads;

    private SharedModels() {}

    /** The weights of {@code modelDir} on {@code deviceName} ({@code cpu} or {@code cuda:N}), loading them once. */
    static synchronized Loaded get(Path modelDir, String deviceName) {
        Device device = DEVICES.computeIfAbsent(deviceName, Devices::open);
        ReentrantLock lock = LOCKS.computeIfAbsent(deviceName, n -> new ReentrantLock());
        String key = modelDir.toAbsolutePath().normalize() + "@" + deviceName;
        LlamaWeights weights = WEIGHTS.get(key);
        if (weights == null) {
            weights = LlamaEngineLoader.loadWeights(modelDir, device);
            WEIGHTS.put(key, weights);
            loads++;
        }
        return new Loaded(device, lock, weights);
    }

    /** How many times weights were read from disk in this process (tests check reuse with it). */
    static synchronized int loads() {
        return loads;
    }
}
