package org.mstar.jobs;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import org.mstar.flink.GenerateOptions;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code mstar serve}: the generation job against a Kafka cluster. Run by {@code flink run mstar-jobs.jar serve
 * ...} it is submitted to that Flink cluster; run directly (Flink on the classpath) it starts a local one. Either
 * way it checkpoints under {@code --state-dir} and a rerun resumes from there (see {@link ServeJob}). The
 * flags only; {@link ServeJob} builds the job, so that the other commands run without Flink on the classpath
 * (picocli inspects every command's fields and methods at start).
 */
@Command(name = "serve", mixinStandardHelpOptions = true,
        description = "Run the generation job: requests from Kafka, responses to Kafka.")
final class ServeCommand implements Callable<Integer> {
    @Mixin
    KafkaTopics topics;

    @Mixin
    KafkaClientFlags kafkaClient;

    @Option(names = "--model", paramLabel = "DIR",
            description = "Model folder (Hugging Face layout), at the same path on every TaskManager.")
    String model;

    @Option(names = "--random", paramLabel = "CONFIG.json", arity = "0..1", fallbackValue = "",
            description = "Instead of --model: random weights of this config.json's geometry, a Llama-family, Mamba2 or"
                    + " Bamba one (no value: a bundled tiny Llama), written once under ~/.cache/mstar. Their text is"
                    + " noise.")
    String random;

    @Option(names = "--engine-factory", paramLabel = "CLASS",
            description = "EngineFactory class with a public (ReadableConfig) constructor. Default: the Llama engine.")
    String engineFactory;

    @Option(names = "--device", paramLabel = "cpu|cuda:N|auto", description = "Default: auto (Flink's GPU resource, else cpu).")
    String device;

    @Option(names = "--parallelism", paramLabel = "N", description = "Generate subtasks, one per GPU.")
    Integer parallelism;

    @Option(names = "--disaggregated",
            description = "Prefill and decode in separate operators, the prefill handing each request's KV to the decode.")
    boolean disaggregated;

    @Option(names = "--prefill-parallelism", paramLabel = "N", description = "With --disaggregated: prefill subtasks.")
    Integer prefillParallelism;

    @Option(names = "--decode-parallelism", paramLabel = "N", description = "With --disaggregated: decode subtasks.")
    Integer decodeParallelism;

    @Option(names = "--prefill-device", paramLabel = "cpu|cuda:N|auto",
            description = "With --disaggregated: the prefill engines' device. Default: --device.")
    String prefillDevice;

    @Option(names = "--decode-device", paramLabel = "cpu|cuda:N|auto",
            description = "With --disaggregated: the decode engines' device. Default: --device.")
    String decodeDevice;

    @Option(names = "--audio-dir", paramLabel = "DIR",
            description = "Folder whose WAV files speech-to-text requests may name by path (send --audio-path);"
                    + " without it, audio must come inline.")
    java.nio.file.Path audioDir;

    @Option(names = "--adapters", paramLabel = "DIR",
            description = "Folder of PEFT LoRA adapters (a subfolder per adapter) that requests may name (send"
                    + " --adapter), at the same path on every TaskManager; -Dmstar.engine.adapter-slots=N sets how many"
                    + " stay on the device at once (default 64).")
    java.nio.file.Path adaptersDir;

    @Option(names = "--random-adapters", paramLabel = "N",
            description = "With --random: N random LoRA adapters (random-1 ...) for it, written once beside it, served"
                    + " as --adapters would; to try send --adapter without a trained adapter.")
    Integer randomAdapters;

    @Option(names = "--quantization", paramLabel = "none|fp8|fp8-w8a8",
            description = "fp8: keep the projections' weights on the device as FP8 codes with scales (an FP8 checkpoint"
                    + " as stored, any other quantised at load, one scale an output row); fp8-w8a8: those weights, and"
                    + " each projection's input quantised per token to FP8 too (FP8 x FP8 GEMMs on a GPU); sets"
                    + " mstar.engine.quantization (default none).")
    String quantization;

    @Option(names = "--tensor-parallel", paramLabel = "N",
            description = "Split the model over N devices of each subtask: the subtask's device and the N-1 after it"
                    + " (cpu: N CPU devices); tensor parallelism, expert parallelism for routed experts; sets"
                    + " mstar.engine.tensor-parallel (default 1).")
    Integer tensorParallel;

    @Option(names = "--kv-cache-dtype", paramLabel = "auto|fp8_e4m3",
            description = "What the KV pages store: the model's dtype (bf16 on a GPU), or FP8 E4M3 codes (half the"
                    + " bytes a token: the sized pool holds twice the tokens); sets mstar.kv.cache-dtype (default"
                    + " auto).")
    String kvCacheDType;

    @Option(names = "--delivery", paramLabel = "GUARANTEE", description = "EXACTLY_ONCE (default) or AT_LEAST_ONCE.")
    String delivery;

    @Option(names = "--transactional-id-prefix", paramLabel = "PREFIX",
            description = "Unique per job on the Kafka cluster; keep it when resuming. Default: ${DEFAULT-VALUE}.")
    String transactionalIdPrefix = "mstar-serve";

    @Option(names = "--group-id", paramLabel = "ID", description = "Consumer group of the requests source.")
    String groupId;

    @Option(names = "--checkpoint-interval", paramLabel = "DURATION", converter = CheckpointIntervalConverter.class,
            description = "Responses become visible to read_committed consumers at each checkpoint: seconds, or a"
                    + " duration such as 250ms. Default: 2 (seconds).")
    Duration checkpointInterval = Duration.ofSeconds(2);

    @Option(names = "--state-dir", paramLabel = "DIR",
            description = "Checkpoints, and what they were taken with; a rerun resumes from the latest one. A local"
                    + " folder, or a URI Flink can write (s3://, hdfs://) that every TaskManager reaches."
                    + " Default: ${DEFAULT-VALUE} in the working directory.")
    String stateDir = "mstar-state";

    @Option(names = "--fresh",
            description = "Delete the checkpoints under --state-dir and start over: requests live in them are not"
                    + " finished, and reading resumes at the consumer group's committed offsets.")
    boolean fresh;

    @Option(names = "--metrics-port", paramLabel = "PORT",
            description = "Serve every metric (Flink's and mstar's) for Prometheus at http://HOST:PORT/metrics,"
                    + " through Flink's Prometheus reporter. For the local cluster; a Flink cluster sets its reporter"
                    + " in its own configuration.")
    Integer metricsPort;

    @Option(names = "-D", paramLabel = "KEY=VALUE",
            description = "Any Flink or mstar.* option, e.g. -Dmstar.engine.max-waiting=32;"
                    + " -Dmstar.kafka.<property>=VALUE sets a Kafka client property.")
    Map<String, String> options = new HashMap<>();

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        if (model != null && random != null) {
            throw new ParameterException(spec.commandLine(), "Give --model or --random, not both.");
        }
        if (randomAdapters != null && (random == null || adaptersDir != null)) {
            throw new ParameterException(spec.commandLine(), "--random-adapters goes with --random, and instead of"
                    + " --adapters.");
        }
        if (model == null && random == null && engineFactory == null && !options.containsKey(GenerateOptions.MODEL_DIR.key())) {
            throw new ParameterException(spec.commandLine(), "serve needs a model: --model DIR (a Hugging Face"
                    + " folder) or --random [CONFIG.json] (random weights; without a value a tiny Llama).");
        }
        if (delivery != null && !List.of("EXACTLY_ONCE", "AT_LEAST_ONCE").contains(delivery.toUpperCase(Locale.ROOT))) {
            throw new ParameterException(spec.commandLine(),
                    "--delivery is EXACTLY_ONCE or AT_LEAST_ONCE, not '" + delivery + "'.");
        }
        PrintWriter err = spec.commandLine().getErr();
        try {
            ServeJob.run(this, err);
            return 0;
        } catch (ServeJob.StateRefused | KafkaCheck.KafkaUnavailable e) {
            err.println(e.getMessage());
            return 2;
        }
    }
}
