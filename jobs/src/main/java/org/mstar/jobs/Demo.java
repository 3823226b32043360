package org.mstar.jobs;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.FileUtils;
import org.mstar.flink.DisaggregationOptions;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import picocli.CommandLine;

/**
 * Runs {@code mstar demo}: a Kafka broker and a Flink MiniCluster in this process, the generation job on them, the
 * prompts sent and their answers streamed to the terminal. The job runs at-least-once, so tokens show as they are
 * generated rather than at each checkpoint; the client drops any repeats.
 */
final class Demo {
    private Demo() {}

    /** @return the exit code: 0 when every prompt was answered */
    static int run(DemoCommand flags, CommandLine cli) throws Exception {
        PrintWriter err = cli.getErr();
        err.println("Starting Kafka and Flink in this process...");
        err.flush();
        Path work = Files.createTempDirectory("mstar-demo-");
        try (EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start()) {
            broker.createTopics(flags.parallelism, "requests", "responses");
            Configuration conf = new Configuration();
            conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofSeconds(2));
            conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, work.resolve("checkpoints").toUri().toString());
            conf.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
            conf.set(GenerateOptions.DEVICE, flags.device);
            if (flags.disaggregated) {
                conf.set(DisaggregationOptions.ENABLED, true);
                err.println("Disaggregated: prefill and decode operators, each request's KV handed between them.");
            }
            if (flags.engineFactory != null) {
                conf.set(GenerateOptions.ENGINE_FACTORY, flags.engineFactory);
            }
            if (flags.model != null) {
                conf.set(GenerateOptions.MODEL_DIR, flags.model);
            } else {
                err.println("No --model: serving a bundled tiny random Llama; its answers are noise.");
                conf.set(GenerateOptions.MODEL_DIR, ModelSource.resolve(null, "", err).toString());
            }
            StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(flags.parallelism, conf);
            GenerationPipeline.builder()
                    .configure(conf)
                    .bootstrapServers(broker.bootstrapServers())
                    .deliveryGuarantee(DeliveryGuarantee.AT_LEAST_ONCE)
                    .build()
                    .addTo(env);
            JobClient job = env.executeAsync("mstar demo");
            try (GenerateClient client = new GenerateClient(broker.bootstrapServers(), "requests", "responses")) {
                err.println("Sending " + flags.prompts.size() + " prompts.");
                err.flush();
                return SendCommand.exchange(cli, client, flags.prompts.stream().map(flags.sampling::request).toList(),
                        Duration.ofSeconds(flags.timeoutSeconds));
            } finally {
                job.cancel().get();
            }
        } finally {
            FileUtils.deleteDirectory(work.toFile());
        }
    }
}
