package org.mstar.jobs;

import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.FutureTask;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExecutionOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.FileUtils;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import org.mstar.schemas.GenerateRequest;
import picocli.CommandLine;

/**
 * Runs {@code mstar bench-delivery}: for each delivery guarantee and checkpoint interval, a fresh MiniCluster runs
 * the generation job (bundled tiny random Llama, parallelism 1) against its own topics of one in-process broker,
 * and a read_committed {@link GenerateClient} times the responses. The tiny model generates in milliseconds, so
 * what the table shows is delivery, not generation.
 */
final class DeliveryBench {
    private DeliveryBench() {}

    /** One job run: a guarantee and the checkpoint interval it runs with. */
    private record Run(DeliveryGuarantee guarantee, Duration checkpointInterval) {
        String label() {
            String mode = guarantee == DeliveryGuarantee.EXACTLY_ONCE ? "exactly-once" : "at-least-once";
            long ms = checkpointInterval.toMillis();
            return mode + ", checkpoint " + (ms % 1000 == 0 ? ms / 1000 + " s" : ms + " ms");
        }
    }

    /** @return the exit code: 0 when every run answered every request */
    static int run(BenchDeliveryCommand flags, CommandLine cli) throws Exception {
        PrintWriter err = cli.getErr();
        List<Run> runs = new ArrayList<>();
        for (double seconds : flags.checkpointSeconds) {
            runs.add(new Run(DeliveryGuarantee.EXACTLY_ONCE, Duration.ofMillis(Math.round(seconds * 1000))));
        }
        runs.add(new Run(DeliveryGuarantee.AT_LEAST_ONCE, runs.get(runs.size() - 1).checkpointInterval()));
        String model = ModelSource.resolve(null, "", err).toString();
        DeliveryTable table = new DeliveryTable();
        Path work = Files.createTempDirectory("mstar-bench-");
        try (EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start()) {
            for (int i = 0; i < runs.size(); i++) {
                Run run = runs.get(i);
                err.println("Running " + run.label() + " ...");
                err.flush();
                DeliveryTimeline timeline = measure(run, "bench" + i, broker, model, work, flags);
                if (!timeline.errors().isEmpty()) {
                    err.println("Error responses in " + run.label() + ": " + timeline.errors());
                    return 1;
                }
                table.add(run.label(), timeline.summary(),
                        ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
            }
        } finally {
            FileUtils.deleteDirectory(work.toFile());
        }
        cli.getOut().print(table);
        cli.getOut().flush();
        return 0;
    }

    private static DeliveryTimeline measure(Run run, String name, EmbeddedKafkaBroker broker, String model,
            Path work, BenchDeliveryCommand flags) throws Exception {
        String requestsTopic = name + "-requests";
        String responsesTopic = name + "-responses";
        broker.createTopics(1, requestsTopic, responsesTopic);
        Configuration conf = new Configuration();
        conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, run.checkpointInterval());
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, work.resolve(name).toUri().toString());
        conf.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
        if (flags.bufferTimeoutMillis != null) {
            conf.set(ExecutionOptions.BUFFER_TIMEOUT, Duration.ofMillis(flags.bufferTimeoutMillis));
        }
        conf.set(GenerateOptions.DEVICE, "cpu");
        conf.set(GenerateOptions.MODEL_DIR, model);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, conf);
        GenerationPipeline.builder()
                .configure(conf)
                .bootstrapServers(broker.bootstrapServers())
                .requestsTopic(requestsTopic)
                .responsesTopic(responsesTopic)
                .deliveryGuarantee(run.guarantee())
                .transactionalIdPrefix("mstar-" + name)
                .build()
                .addTo(env);
        JobClient job = env.executeAsync("mstar bench-delivery " + run.label());
        Duration timeout = Duration.ofSeconds(flags.timeoutSeconds);
        try (GenerateClient client = new GenerateClient(broker.bootstrapServers(), requestsTopic, responsesTopic)) {
            // Model loading, JIT warm-up and the first transaction are start-up costs, not delivery: exclude them.
            GenerateRequest warmUp = request(name + "-warmup", 0, flags.maxTokens);
            client.send(warmUp);
            expectAnswered(client.await(Set.of(warmUp.getRequestId()), timeout, r -> {}), run);

            List<GenerateRequest> requests = new ArrayList<>();
            for (int i = 0; i < flags.requests; i++) {
                requests.add(request(name + "-" + i, i + 1, flags.maxTokens));
            }
            DeliveryTimeline timeline = new DeliveryTimeline();
            // The producer may be used from another thread while this one polls; the consumer may not.
            FutureTask<Void> sending = new FutureTask<>(() -> {
                for (GenerateRequest r : requests) {
                    timeline.sent(r.getRequestId(), System.nanoTime());
                    client.send(r);
                    Thread.sleep(flags.spacingMillis);
                }
                return null;
            });
            new Thread(sending, "bench-delivery-sender").start();
            Set<String> ids = new LinkedHashSet<>(requests.stream().map(GenerateRequest::getRequestId).toList());
            Set<String> unanswered = client.await(ids, timeout, r -> timeline.arrived(r, System.nanoTime()));
            sending.get();
            expectAnswered(unanswered, run);
            return timeline;
        } finally {
            job.cancel().get();
        }
    }

    /** Fixed seeds and EOS ignored: every run generates the same number of tokens. */
    private static GenerateRequest request(String id, long seed, int maxTokens) {
        return GenerateRequest.newBuilder()
                .setRequestId(id)
                .setPrompt("Request " + seed + " of the delivery benchmark")
                .setMaxTokens(maxTokens)
                .setTemperature(1.0)
                .setSeed(seed)
                .setIgnoreEos(true)
                .build();
    }

    private static void expectAnswered(Set<String> unanswered, Run run) {
        if (!unanswered.isEmpty()) {
            throw new IllegalStateException(run.label() + ": no complete response for " + unanswered);
        }
    }
}
