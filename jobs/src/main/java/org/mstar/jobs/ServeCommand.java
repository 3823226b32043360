package org.mstar.jobs;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import org.mstar.flink.KafkaIoOptions;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code mstar serve}: the generation job against a Kafka cluster. Run by {@code flink run mstar-jobs.jar serve
 * ...} it is submitted to that Flink cluster; run directly (Flink on the classpath) it starts a local one.
 */
@Command(name = "serve", mixinStandardHelpOptions = true,
        description = "Run the generation job: requests from Kafka, responses to Kafka.")
final class ServeCommand implements Callable<Integer> {
    @Mixin
    KafkaTopics topics;

    @Option(names = "--engine-factory", paramLabel = "CLASS",
            description = "EngineFactory class with a public (ReadableConfig) constructor (" + "mstar.engine.factory).")
    String engineFactory;

    @Option(names = "--model", paramLabel = "DIR", description = "Model folder, the same path on every TaskManager.")
    String model;

    @Option(names = "--device", paramLabel = "cpu|cuda:N|auto", description = "Default: auto (Flink's GPU resource, else cpu).")
    String device;

    @Option(names = "--parallelism", paramLabel = "N", description = "Generate subtasks, one per GPU.")
    Integer parallelism;

    @Option(names = "--delivery", paramLabel = "GUARANTEE", description = "EXACTLY_ONCE (default) or AT_LEAST_ONCE.")
    DeliveryGuarantee delivery;

    @Option(names = "--transactional-id-prefix", paramLabel = "PREFIX",
            description = "Unique per job on the Kafka cluster; keep it when resuming. Default: ${DEFAULT-VALUE}.")
    String transactionalIdPrefix = "mstar-serve";

    @Option(names = "--group-id", paramLabel = "ID", description = "Consumer group of the requests source.")
    String groupId;

    @Option(names = "--checkpoint-interval", paramLabel = "SECONDS",
            description = "Responses become visible to read_committed consumers at each checkpoint. Default: ${DEFAULT-VALUE}.")
    long checkpointSeconds = 10;

    @Option(names = "-D", paramLabel = "KEY=VALUE", description = "Any Flink or mstar.* option, e.g. -Dmstar.engine.max-waiting=32.")
    Map<String, String> options = new HashMap<>();

    @Override
    public Integer call() throws Exception {
        Configuration conf = configuration();
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        GenerationPipeline.Builder builder = GenerationPipeline.builder().configure(conf);
        if (parallelism != null) {
            builder.parallelism(parallelism);
        }
        builder.build().addTo(env);
        env.execute("mstar serve");
        return 0;
    }

    Configuration configuration() {
        Configuration conf = Configuration.fromMap(options);
        conf.set(KafkaIoOptions.BOOTSTRAP_SERVERS, topics.bootstrapServers);
        conf.set(KafkaIoOptions.REQUESTS_TOPIC, topics.requestsTopic);
        conf.set(KafkaIoOptions.RESPONSES_TOPIC, topics.responsesTopic);
        conf.set(KafkaIoOptions.TRANSACTIONAL_ID_PREFIX, transactionalIdPrefix);
        setIfGiven(conf, KafkaIoOptions.GROUP_ID, groupId);
        setIfGiven(conf, KafkaIoOptions.DELIVERY_GUARANTEE, delivery);
        setIfGiven(conf, GenerateOptions.ENGINE_FACTORY, engineFactory);
        setIfGiven(conf, GenerateOptions.MODEL_DIR, model);
        setIfGiven(conf, GenerateOptions.DEVICE, device);
        if (!conf.contains(CheckpointingOptions.CHECKPOINTING_INTERVAL)) {
            conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofSeconds(checkpointSeconds));
        }
        if (!conf.contains(StateBackendOptions.STATE_BACKEND)) {
            conf.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
        }
        return conf;
    }

    private static <T> void setIfGiven(Configuration conf, org.apache.flink.configuration.ConfigOption<T> option, T value) {
        if (value != null) {
            conf.set(option, value);
        }
    }
}
