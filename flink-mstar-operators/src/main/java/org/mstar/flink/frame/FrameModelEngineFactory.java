package org.mstar.flink.frame;

import java.nio.file.Path;
import java.util.Locale;
import org.apache.flink.configuration.ReadableConfig;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Devices;
import org.mstar.device.KernelOptions;
import org.mstar.engine.frame.FrameEngine;
import org.mstar.engine.frame.FrameSessions;
import org.mstar.engine.frame.SessionRanking;
import org.mstar.flink.LlamaEngineOptions;
import org.mstar.model.frame.FrameModel;

/**
 * A {@link FrameEngine} over the frame model in {@link FrameOptions#MODEL_DIR}, one per subtask, on a device with
 * batch-invariant numerics when {@code mstar.engine.batch-invariant} asks for them; its sessions rank for a ring by
 * {@link FrameOptions#SCHEDULING_POLICY}.
 */
public final class FrameModelEngineFactory implements FrameEngineFactory {
    private static final long serialVersionUID = 1L;

    private final String modelDir;
    private final int residentSessions;
    private final DType dtype;
    private final boolean batchInvariant;
    private final SessionRanking ranking;

    public FrameModelEngineFactory(ReadableConfig config) {
        this.modelDir = config.getOptional(FrameOptions.MODEL_DIR).orElseThrow(() ->
                new IllegalArgumentException("'" + FrameOptions.MODEL_DIR.key() + "' names no frame model folder"));
        this.residentSessions = config.get(FrameOptions.RESIDENT_SESSIONS);
        if (residentSessions < 1) {
            throw new IllegalArgumentException("'" + FrameOptions.RESIDENT_SESSIONS.key() + "' must be >= 1, got "
                    + residentSessions);
        }
        this.dtype = floatType(config.get(FrameOptions.DTYPE));
        // the same knob as the generation engine's: replays after a restore rebuild a ring bit for bit only with it on a GPU
        this.batchInvariant = config.get(LlamaEngineOptions.BATCH_INVARIANT);
        if (config.get(FrameOptions.PRIORITY_AGING).isNegative()) {
            throw new IllegalArgumentException("'" + FrameOptions.PRIORITY_AGING.key() + "' must be >= 0, got "
                    + config.get(FrameOptions.PRIORITY_AGING));
        }
        this.ranking = new SessionRanking(config.get(FrameOptions.SCHEDULING_POLICY),
                config.get(FrameOptions.PRIORITY_AGING));
    }

    /** @throws IllegalArgumentException naming the option and the types it takes */
    private static DType floatType(String name) {
        for (DType t : DType.values()) {
            if (t.isFloat() && t.name().equals(name.toUpperCase(Locale.ROOT))) {
                return t;
            }
        }
        throw new IllegalArgumentException("'" + FrameOptions.DTYPE.key() + "' (--dtype) is F32, BF16 or F16, not '"
                + name + "'");
    }

    @Override
    public FrameSessions create(String device, int subtaskIndex) throws Exception {
        Device d = Devices.open(device, KernelOptions.defaults().withBatchInvariant(batchInvariant));
        try {
            return FrameEngine.owning(FrameModel.load(Path.of(modelDir), d, dtype), residentSessions, ranking);
        } catch (Exception | Error e) {
            d.close();
            throw e;
        }
    }
}
