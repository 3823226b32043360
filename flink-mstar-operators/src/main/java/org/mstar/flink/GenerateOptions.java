package org.mstar.flink;

import java.time.Duration;
import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;

/** Knobs of the {@link GenerateOperator} and of the engine it builds. */
@PublicEvolving
public final class GenerateOptions {
    private GenerateOptions() {}

    public static final ConfigOption<String> ENGINE_FACTORY = ConfigOptions.key("mstar.engine.factory")
            .stringType()
            .defaultValue(LlamaEngineFactory.class.getName())
            .withDescription("Class name of the EngineFactory that builds each subtask's engine. It needs a public"
                    + " constructor taking the job's ReadableConfig, from which it reads 'mstar.model.dir' and its"
                    + " own options. The default serves Llama-family checkpoints, and Whisper, Mamba2 and Bamba"
                    + " ones by the engine their config.json names.");

    public static final ConfigOption<String> MODEL_DIR = ConfigOptions.key("mstar.model.dir")
            .stringType()
            .noDefaultValue()
            .withDescription("Folder of the model the engine serves (config.json, weights, tokenizer). It must be"
                    + " readable at the same path on every TaskManager.");

    public static final ConfigOption<String> DEVICE = ConfigOptions.key("mstar.engine.device")
            .stringType()
            .defaultValue("auto")
            .withDescription("Where each subtask's engine runs: 'cpu', 'cuda:N', a list such as 'cuda:0,cuda:1'"
                    + " (subtask i takes entry i modulo its length: one TaskManager with several GPUs), or 'auto',"
                    + " which takes a GPU from Flink's external-resource info (named by 'mstar.engine.gpu-resource')"
                    + " and falls back to 'cpu' when the TaskManager has none.");

    public static final ConfigOption<String> GPU_RESOURCE = ConfigOptions.key("mstar.engine.gpu-resource")
            .stringType()
            .defaultValue("gpu")
            .withDescription("Name of the Flink external resource ('external-resources') that lists the"
                    + " TaskManager's GPUs, for 'mstar.engine.device' = auto.");

    public static final ConfigOption<Integer> MAX_WAITING = ConfigOptions.key("mstar.engine.max-waiting")
            .intType()
            .noDefaultValue()
            .withDescription("Most requests one subtask keeps waiting for admission. When reached, the operator"
                    + " runs engine steps before it takes the next request, so Kafka consumption slows down"
                    + " instead of memory growing. Unset: the engine's batch rows, at least "
                    + GenerateOptions.MIN_WAITING + ", so that a step's free rows can all be refilled at once.");

    /** The least {@link #MAX_WAITING} defaults to. */
    static final int MIN_WAITING = 64;

    public static final ConfigOption<Duration> QUEUE_TIMEOUT = ConfigOptions.key("mstar.engine.queue-timeout")
            .durationType()
            .noDefaultValue()
            .withDescription("When set, a request that has produced no token this long after it arrived is dropped"
                    + " with a 429 error event. Unset: requests wait as long as it takes.");

    public static final ConfigOption<Integer> DEFAULT_MAX_TOKENS = ConfigOptions.key("mstar.request.default-max-tokens")
            .intType()
            .defaultValue(256)
            .withDescription("max_tokens of a request that does not set it.");

    public static final ConfigOption<Duration> REQUEST_ID_RETENTION = ConfigOptions.key("mstar.request.id-retention")
            .durationType()
            .defaultValue(Duration.ofHours(1))
            .withDescription("How long the id of a served request is remembered (in keyed state, per id): a request"
                    + " arriving under it within this time gets a 409 error event instead of being generated again."
                    + " 0 remembers nothing.");

    public static final ConfigOption<Duration> AUDIO_MAX_DURATION = ConfigOptions.key("mstar.audio.max-duration")
            .durationType()
            .defaultValue(Duration.ofMinutes(10))
            .withDescription("Longest audio a speech-to-text request may carry; longer audio gets a 400 error event."
                    + " The limit is checked from the WAV header before a referenced file's samples are read.");

    public static final ConfigOption<String> AUDIO_DIR = ConfigOptions.key("mstar.audio.dir")
            .stringType()
            .noDefaultValue()
            .withDescription("Folder whose WAV files audio requests may name by path (audio.path, relative to it or"
                    + " absolute inside it); it must be readable at the same path on every TaskManager. Unset:"
                    + " requests must carry their audio inline, and a path gets a 400 error event.");
}
