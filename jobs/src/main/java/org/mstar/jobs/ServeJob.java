package org.mstar.jobs;

import java.time.Duration;
import java.util.Locale;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.mstar.flink.DisaggregationOptions;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import org.mstar.flink.KafkaIoOptions;

/** The job {@code mstar serve} runs, configured from its flags. */
final class ServeJob {
    private ServeJob() {}

    /** Builds the job and runs it until it ends (or, under {@code flink run -d}, submits it). */
    static void run(ServeCommand flags) throws Exception {
        Configuration conf = configuration(flags);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        GenerationPipeline.Builder builder = GenerationPipeline.builder().configure(conf);
        if (flags.parallelism != null) {
            builder.parallelism(flags.parallelism);
        }
        builder.build().addTo(env);
        env.execute("mstar serve");
    }

    /** The -D options, overridden by the flags; RocksDB and a checkpoint interval unless -D chose otherwise. */
    static Configuration configuration(ServeCommand flags) {
        Configuration conf = Configuration.fromMap(flags.options);
        conf.set(KafkaIoOptions.BOOTSTRAP_SERVERS, flags.topics.bootstrapServers);
        conf.set(KafkaIoOptions.REQUESTS_TOPIC, flags.topics.requestsTopic);
        conf.set(KafkaIoOptions.RESPONSES_TOPIC, flags.topics.responsesTopic);
        conf.set(KafkaIoOptions.TRANSACTIONAL_ID_PREFIX, flags.transactionalIdPrefix);
        setIfGiven(conf, KafkaIoOptions.GROUP_ID, flags.groupId);
        setIfGiven(conf, KafkaIoOptions.DELIVERY_GUARANTEE,
                flags.delivery == null ? null : DeliveryGuarantee.valueOf(flags.delivery.toUpperCase(Locale.ROOT)));
        setIfGiven(conf, GenerateOptions.ENGINE_FACTORY, flags.engineFactory);
        setIfGiven(conf, GenerateOptions.MODEL_DIR, flags.model);
        setIfGiven(conf, GenerateOptions.DEVICE, flags.device);
        if (flags.disaggregated) {
            conf.set(DisaggregationOptions.ENABLED, true);
        }
        setIfGiven(conf, DisaggregationOptions.PREFILL_PARALLELISM, flags.prefillParallelism);
        setIfGiven(conf, DisaggregationOptions.DECODE_PARALLELISM, flags.decodeParallelism);
        setIfGiven(conf, DisaggregationOptions.PREFILL_DEVICE, flags.prefillDevice);
        setIfGiven(conf, DisaggregationOptions.DECODE_DEVICE, flags.decodeDevice);
        if (!conf.contains(CheckpointingOptions.CHECKPOINTING_INTERVAL)) {
            conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofSeconds(flags.checkpointSeconds));
        }
        if (!conf.contains(StateBackendOptions.STATE_BACKEND)) {
            conf.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
        }
        return conf;
    }

    private static <T> void setIfGiven(Configuration conf, ConfigOption<T> option, T value) {
        if (value != null) {
            conf.set(option, value);
        }
    }
}
