package org.mstar.jobs;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Callable;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code mstar demo}: a Kafka broker and a Flink MiniCluster in this process, the generation job on them, a few
 * prompts sent and their answers streamed to the terminal. The job runs at-least-once so tokens show as they
 * are generated rather than at each checkpoint; the client drops any repeats.
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = "Start Kafka and Flink in this process, send prompts and stream the answers.")
final class DemoCommand implements Callable<Integer> {
    static final List<String> DEFAULT_PROMPTS = List.of(
            "The capital of France is",
            "Write a haiku about stream processing.",
            "Explain what a KV cache is in one sentence.");

    @Option(names = "--engine-factory", required = true, paramLabel = "CLASS",
            description = "EngineFactory class with a public (ReadableConfig) constructor.")
    String engineFactory;

    @Option(names = "--model", paramLabel = "DIR", description = "Model folder the engine loads.")
    String model;

    @Option(names = "--device", paramLabel = "cpu|cuda:N", description = "Default: ${DEFAULT-VALUE}.")
    String device = "cpu";

    @Option(names = "--prompt", paramLabel = "TEXT", description = "A prompt to send; repeatable. Default: three examples.")
    List<String> prompts = DEFAULT_PROMPTS;

    @Option(names = "--parallelism", paramLabel = "N", description = "Generate subtasks. Default: ${DEFAULT-VALUE}.")
    int parallelism = 1;

    @Option(names = "--timeout", paramLabel = "SECONDS", description = "Default: ${DEFAULT-VALUE}.")
    long timeoutSeconds = 300;

    @Mixin
    SamplingFlags sampling;

    @Override
    public Integer call() throws Exception {
        System.err.println("Starting Kafka and Flink in this process...");
        Path checkpoints = Files.createTempDirectory("mstar-demo-checkpoints-");
        try (EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start()) {
            broker.createTopics(parallelism, "requests", "responses");
            Configuration conf = new Configuration();
            conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofSeconds(2));
            conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, checkpoints.toUri().toString());
            conf.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
            conf.set(GenerateOptions.ENGINE_FACTORY, engineFactory);
            conf.set(GenerateOptions.DEVICE, device);
            if (model != null) {
                conf.set(GenerateOptions.MODEL_DIR, model);
            }
            StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(parallelism, conf);
            GenerationPipeline.builder()
                    .configure(conf)
                    .bootstrapServers(broker.bootstrapServers())
                    .deliveryGuarantee(DeliveryGuarantee.AT_LEAST_ONCE)
                    .build()
                    .addTo(env);
            JobClient job = env.executeAsync("mstar demo");
            try (GenerateClient client = new GenerateClient(broker.bootstrapServers(), "requests", "responses")) {
                System.err.println("Sending " + prompts.size() + " prompts.");
                return SendCommand.exchange(client, prompts.stream().map(sampling::request).toList(),
                        Duration.ofSeconds(timeoutSeconds));
            } finally {
                job.cancel().get();
            }
        }
    }
}
