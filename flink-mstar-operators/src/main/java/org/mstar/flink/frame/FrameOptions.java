package org.mstar.flink.frame;

import java.time.Duration;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.mstar.engine.SchedulingPolicy;

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
            .withDescription("Sessions each subtask keeps a ring for; more sessions wait until one closes, or, under"
                    + " the PRIORITY policy, until they outrank a resident one.");

    public static final ConfigOption<SchedulingPolicy> SCHEDULING_POLICY =
            ConfigOptions.key("mstar.frames.scheduling-policy")
            .enumType(SchedulingPolicy.class)
            .defaultValue(SchedulingPolicy.FCFS)
            .withDescription("Which waiting session gets a free ring first: FCFS (arrival), or PRIORITY (an OPEN's"
                    + " priority, raised by waiting), under which a waiting session also takes the ring of the"
                    + " lowest-ranked resident session it outranks; that one gets a ring back later by replay.");

    public static final ConfigOption<Duration> PRIORITY_AGING = ConfigOptions.key("mstar.frames.priority-aging")
            .durationType()
            .defaultValue(Duration.ofSeconds(1))
            .withDescription("Under PRIORITY, a priority level is worth this much waiting; 0 for strict priority.");

    public static final ConfigOption<String> DTYPE = ConfigOptions.key("mstar.frames.dtype")
            .stringType()
            .defaultValue("F32")
            .withDescription("Weights, activations and ring KV dtype: F32, BF16 or F16.");

    private FrameOptions() {
    }
}
