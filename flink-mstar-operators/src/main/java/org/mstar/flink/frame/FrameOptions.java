package org.mstar.flink.frame;

import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;

/** Options of a frame-session job (docs/guides/frames.md). */
public final class FrameOptions {
    public static final ConfigOption<String> MODEL_DIR = ConfigOptions.key("mstar.frames.model-dir")
            .stringType()
            .noDefaultValue()
            .withDescription("Folder of the frame model (frame_config.json and model.safetensors), readable at the"
                    + " same path on every TaskManager.");

    public static final ConfigOption<Integer> RESIDENT_SESSIONS = ConfigOptions.key("mstar.frames.resident-sessions")
            .intType()
            .defaultValue(4)
            .withDescription("Sessions each subtask keeps a ring for; more sessions wait until one closes.");

    public static final ConfigOption<String> DTYPE = ConfigOptions.key("mstar.frames.dtype")
            .stringType()
            .defaultValue("F32")
            .withDescription("Weights, activations and ring KV dtype: F32, BF16 or F16.");

    private FrameOptions() {
    }
}
