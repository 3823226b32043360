package org.mstar.flink;

import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.KafkaSinkBuilder;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.types.Either;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.mstar.engine.EngineRole;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.Response;

/**
 * The dataflow of a generation job: requests from Kafka → validation (bad input becomes error events) →
 * keyBy(request id) → {@link GenerateOperator} → responses to Kafka. Build it with {@link #builder()}.
 *
 * <p>What a restart can repeat or drop: nothing under {@link DeliveryGuarantee#EXACTLY_ONCE}, for consumers
 * that read with {@code isolation.level=read_committed} (they see responses once each checkpoint completes).
 * Under {@link DeliveryGuarantee#AT_LEAST_ONCE} responses are visible at once and, after a restore, the events
 * since the last checkpoint come again (identical, as generation is deterministic): a consumer drops a
 * {@code TokenEvent} whose (request_id, index) it has seen and a second {@code GenerateResult} of a request.
 * Operator uids are fixed, so a job resumes from its savepoints across versions and parallelism changes.
 */
@PublicEvolving
public final class GenerationPipeline {
    static final String SOURCE_UID = "mstar-requests";
    static final String VALIDATE_UID = "mstar-validate";
    static final String GENERATE_UID = "mstar-generate";
    static final String SINK_UID = "mstar-responses";

    /**
     * The metric, in each engine operator's group {@code mstar}, that is 1 once the subtask's engine is built and
     * serving and 0 while it is built: a task runs before its engine is built (see {@link EngineStart}).
     */
    public static final String ENGINE_STARTED_METRIC = "engineStarted";

    private final Configuration options;
    private final EngineFactory engineFactory;
    private final OffsetsInitializer startingOffsets;
    private final Properties kafkaProperties;
    private final Integer parallelism;
    /** Null unless prefill and decode run in separate operators. */
    private final DisaggregatedStages disaggregated;

    private GenerationPipeline(Builder b, EngineFactory engineFactory, DisaggregatedStages disaggregated) {
        this.options = b.options;
        this.engineFactory = engineFactory;
        this.startingOffsets = b.startingOffsets;
        this.kafkaProperties = b.kafkaProperties;
        this.parallelism = b.parallelism;
        this.disaggregated = disaggregated;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Operators of this pipeline that build an engine in each subtask: generate, or prefill and decode. */
    public int engineOperators() {
        return disaggregated == null ? 1 : 2;
    }

    /** The engine each generate subtask builds from, as resolved when the pipeline was built. */
    EngineFactory engineFactory() {
        return engineFactory;
    }

    /**
     * Adds source, validation, generation and sink to {@code env}.
     *
     * @return every response, as the sink writes them (for taps such as logging)
     * @throws IllegalStateException EXACTLY_ONCE without checkpointing
     */
    public DataStream<Response> addTo(StreamExecutionEnvironment env) {
        DeliveryGuarantee guarantee = options.get(KafkaIoOptions.DELIVERY_GUARANTEE);
        if (guarantee == DeliveryGuarantee.EXACTLY_ONCE && !env.getCheckpointConfig().isCheckpointingEnabled()) {
            throw new IllegalStateException("EXACTLY_ONCE commits responses when checkpoints complete: enable"
                    + " checkpointing ('execution.checkpointing.interval') or choose AT_LEAST_ONCE.");
        }
        GenerateSettings settings = GenerateSettings.from(options);

        DataStream<Either<ErrorEvent, GenerateRequest>> requests =
                env.fromSource(source(), WatermarkStrategy.noWatermarks(), "mstar requests").uid(SOURCE_UID);
        SingleOutputStreamOperator<GenerateRequest> valid = requests
                .process(new RequestValidator(settings.converter()))
                .name("mstar validate").uid(VALIDATE_UID);
        DataStream<Response> generated;
        Integer sinkParallelism = parallelism;
        if (disaggregated != null) {
            generated = disaggregated.addTo(valid);
            if (disaggregated.decodeParallelism() != null) {
                sinkParallelism = disaggregated.decodeParallelism();
            }
        } else {
            SingleOutputStreamOperator<Response> colocated = valid
                    .keyBy(r -> r.getRequestId(), Types.STRING)
                    .transform("mstar generate", new AvroTypeInfo<>(Response.class),
                            new GenerateOperatorFactory(engineFactory, settings))
                    .uid(GENERATE_UID);
            if (parallelism != null) {
                colocated.setParallelism(parallelism);
            }
            generated = colocated;
        }
        DataStream<Response> responses = generated.union(valid.getSideOutput(RequestValidator.REJECTED));
        var sink = responses.sinkTo(new OutageTolerantKafkaSink<>(sink(guarantee))).name("mstar responses")
                .uid(SINK_UID);
        if (sinkParallelism != null) {
            sink.setParallelism(sinkParallelism);
        }
        return responses;
    }

    /** The requests source; it commits the consumer group's offsets on the broker as checkpoints complete. */
    private PromptCommitKafkaSource<Either<ErrorEvent, GenerateRequest>> source() {
        return new PromptCommitKafkaSource<>(KafkaSource.<Either<ErrorEvent, GenerateRequest>>builder()
                .setBootstrapServers(options.get(KafkaIoOptions.BOOTSTRAP_SERVERS))
                .setTopics(options.get(KafkaIoOptions.REQUESTS_TOPIC))
                .setGroupId(options.get(KafkaIoOptions.GROUP_ID))
                .setStartingOffsets(startingOffsets)
                .setDeserializer(new RequestDeserializer())
                .setProperties(KafkaClientProperties.withConfigProviders(kafkaProperties))
                // Requests written in aborted transactions were never sent.
                .setProperty("isolation.level", "read_committed")
                .build());
    }

    private KafkaSink<Response> sink(DeliveryGuarantee guarantee) {
        KafkaSinkBuilder<Response> b = KafkaSink.<Response>builder()
                .setBootstrapServers(options.get(KafkaIoOptions.BOOTSTRAP_SERVERS))
                .setRecordSerializer(new ResponseSerializer(options.get(KafkaIoOptions.RESPONSES_TOPIC)))
                .setKafkaProducerConfig(KafkaClientProperties.withConfigProviders(kafkaProperties))
                .setDeliveryGuarantee(guarantee);
        if (guarantee == DeliveryGuarantee.EXACTLY_ONCE) {
            b.setTransactionalIdPrefix(options.get(KafkaIoOptions.TRANSACTIONAL_ID_PREFIX))
                    .setTransactionNamingStrategy(options.get(KafkaIoOptions.TRANSACTION_NAMING))
                    // Flink's 1 h default exceeds the broker's transaction.max.timeout.ms (15 min) and fails the job.
                    .setProperty("transaction.timeout.ms",
                            Long.toString(options.get(KafkaIoOptions.TRANSACTION_TIMEOUT).toMillis()));
        }
        return b.build();
    }

    /**
     * Builds a {@link GenerationPipeline}. A minimal job:
     *
     * <pre>{@code
     * StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
     * env.enableCheckpointing(10_000);
     * GenerationPipeline.builder()
     *         .bootstrapServers("localhost:9092")
     *         .requestsTopic("requests")
     *         .responsesTopic("responses")
     *         .set(GenerateOptions.MODEL_DIR, "/models/Llama-3.2-1B-Instruct")
     *         .transactionalIdPrefix("mstar-serve")
     *         .build()
     *         .addTo(env);
     * env.execute("mstar serve");
     * }</pre>
     *
     * <p>Required: bootstrap servers; a model folder ({@link GenerateOptions#MODEL_DIR}) for the default engine, or
     * another engine as a factory or a class name in {@link GenerateOptions#ENGINE_FACTORY}; and under EXACTLY_ONCE
     * (the default) a transactional-id prefix and checkpointing. Every setting is also a {@link ConfigOption} of {@link KafkaIoOptions} or {@link
     * GenerateOptions}, so {@link #configure} can take them all from a job's configuration; a setter called
     * later wins.
     */
    @PublicEvolving
    public static final class Builder {
        private final Configuration options = new Configuration();
        private EngineFactory engineFactory;
        private OffsetsInitializer startingOffsets = OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST);
        private final Properties kafkaProperties = new Properties();
        private Integer parallelism;
        private EngineFactory prefillEngineFactory;
        private EngineFactory decodeEngineFactory;

        private Builder() {}

        /**
         * Takes every option of {@link KafkaIoOptions} and {@link GenerateOptions} that {@code config} sets, and its
         * Kafka client properties ({@link KafkaClientProperties}: {@code mstar.kafka.security.protocol} and the like).
         */
        public Builder configure(Configuration config) {
            options.addAll(config);
            kafkaProperties.putAll(KafkaClientProperties.from(config.toMap()));
            return this;
        }

        /** Sets one option of {@link KafkaIoOptions} or {@link GenerateOptions}. */
        public <T> Builder set(ConfigOption<T> option, T value) {
            options.set(option, value);
            return this;
        }

        /** @param servers host:port[,host:port...] */
        public Builder bootstrapServers(String servers) {
            return set(KafkaIoOptions.BOOTSTRAP_SERVERS, servers);
        }

        public Builder requestsTopic(String topic) {
            return set(KafkaIoOptions.REQUESTS_TOPIC, topic);
        }

        public Builder responsesTopic(String topic) {
            return set(KafkaIoOptions.RESPONSES_TOPIC, topic);
        }

        public Builder groupId(String groupId) {
            return set(KafkaIoOptions.GROUP_ID, groupId);
        }

        /** @param guarantee EXACTLY_ONCE (default) or AT_LEAST_ONCE */
        public Builder deliveryGuarantee(DeliveryGuarantee guarantee) {
            return set(KafkaIoOptions.DELIVERY_GUARANTEE, guarantee);
        }

        /** @param prefix unique among the jobs writing to the cluster, unchanged across savepoints */
        public Builder transactionalIdPrefix(String prefix) {
            return set(KafkaIoOptions.TRANSACTIONAL_ID_PREFIX, prefix);
        }

        /**
         * Builds each subtask's engine; takes precedence over {@link GenerateOptions#ENGINE_FACTORY}, which
         * defaults to a {@link LlamaEngineFactory} serving {@link GenerateOptions#MODEL_DIR}.
         */
        public Builder engineFactory(EngineFactory factory) {
            this.engineFactory = factory;
            return this;
        }

        /** @param offsets where a job without state starts reading; default: committed offsets, else earliest */
        public Builder startingOffsets(OffsetsInitializer offsets) {
            this.startingOffsets = offsets;
            return this;
        }

        /**
         * A Kafka client property for the source's consumer and the sink's producers (security, etc.); a value may
         * refer to a secret as {@code ${file:PATH:KEY}}, {@code ${dir:DIR:FILE}} or {@code ${env:NAME}}
         * ({@link KafkaClientProperties}).
         */
        public Builder kafkaProperty(String key, String value) {
            kafkaProperties.setProperty(key, value);
            return this;
        }

        /**
         * Prefill and decode in separate operators ({@link DisaggregationOptions}): each side's engines are built by
         * the factory given here for it, else from {@link GenerateOptions#ENGINE_FACTORY} with that side's
         * {@link DisaggregationOptions#ENGINE_ROLE}.
         */
        public Builder disaggregated(boolean on) {
            return set(DisaggregationOptions.ENABLED, on);
        }

        /** Builds each prefill subtask's engine (a {@code PREFILL} one), when disaggregated. */
        public Builder prefillEngineFactory(EngineFactory factory) {
            this.prefillEngineFactory = factory;
            return this;
        }

        /** Builds each decode subtask's engine (a {@code DECODE} one), when disaggregated. */
        public Builder decodeEngineFactory(EngineFactory factory) {
            this.decodeEngineFactory = factory;
            return this;
        }

        /** @param parallelism subtasks of the generate operator and the sink, one per GPU; default: the job's */
        public Builder parallelism(int parallelism) {
            if (parallelism < 1) {
                throw new IllegalArgumentException("parallelism must be >= 1, got " + parallelism);
            }
            this.parallelism = parallelism;
            return this;
        }

        /** @throws IllegalArgumentException naming each missing or contradictory setting */
        public GenerationPipeline build() {
            List<String> problems = new ArrayList<>();
            if (options.getOptional(KafkaIoOptions.BOOTSTRAP_SERVERS).isEmpty()) {
                problems.add("No Kafka bootstrap servers: call bootstrapServers(..) or set '"
                        + KafkaIoOptions.BOOTSTRAP_SERVERS.key() + "'.");
            }
            boolean split = options.get(DisaggregationOptions.ENABLED);
            EngineFactory factory = engineFactory;
            DisaggregatedStages stages = null;
            if (split) {
                try {
                    stages = new DisaggregatedStages(options,
                            sideFactory(prefillEngineFactory, DisaggregationOptions.PREFILL_DEVICE, EngineRole.PREFILL),
                            sideFactory(decodeEngineFactory, DisaggregationOptions.DECODE_DEVICE, EngineRole.DECODE));
                } catch (IllegalArgumentException e) {
                    problems.add(e.getMessage());
                }
            } else if (factory == null) {
                try {
                    factory = EngineFactory.fromConfig(options, Thread.currentThread().getContextClassLoader());
                } catch (IllegalArgumentException e) {
                    problems.add(e.getMessage());
                }
            }
            DeliveryGuarantee guarantee = options.get(KafkaIoOptions.DELIVERY_GUARANTEE);
            if (guarantee == DeliveryGuarantee.NONE) {
                problems.add("Delivery guarantee NONE would lose tokens on every restart: use EXACTLY_ONCE or"
                        + " AT_LEAST_ONCE.");
            }
            if (guarantee == DeliveryGuarantee.EXACTLY_ONCE
                    && options.getOptional(KafkaIoOptions.TRANSACTIONAL_ID_PREFIX).isEmpty()) {
                problems.add("EXACTLY_ONCE needs a transactional-id prefix, unique among the jobs writing to the"
                        + " cluster: call transactionalIdPrefix(..) or set '"
                        + KafkaIoOptions.TRANSACTIONAL_ID_PREFIX.key() + "', or use AT_LEAST_ONCE.");
            }
            options.keySet().stream()
                    .filter(k -> k.startsWith(KafkaClientProperties.PREFIX) && !KafkaIoOptions.keys().contains(k)
                            && !KafkaClientProperties.isPropertyKey(k))
                    .forEach(k -> problems.add("Unknown option '" + k + "': the options of mstar.kafka are "
                            + String.join(", ", KafkaIoOptions.keys()) + "; a Kafka client property is"
                            + " mstar.kafka.<its name>, e.g. mstar.kafka.security.protocol."));
            if (options.get(KafkaIoOptions.REQUESTS_TOPIC).equals(options.get(KafkaIoOptions.RESPONSES_TOPIC))) {
                problems.add("Requests and responses share topic '" + options.get(KafkaIoOptions.REQUESTS_TOPIC)
                        + "': give them different topics.");
            }
            try {
                GenerateSettings.from(options);
            } catch (IllegalArgumentException e) {
                problems.add(e.getMessage());
            }
            if (!problems.isEmpty()) {
                throw new IllegalArgumentException(String.join(" ", problems));
            }
            return new GenerationPipeline(this, factory, stages);
        }

        private EngineFactory sideFactory(EngineFactory given, ConfigOption<String> device, EngineRole role) {
            if (given != null) {
                return given;
            }
            if (engineFactory != null) {
                throw new IllegalArgumentException("A disaggregated pipeline builds its engines per side: call"
                        + " prefillEngineFactory(..) and decodeEngineFactory(..) instead of engineFactory(..).");
            }
            return EngineFactory.fromConfig(DisaggregatedStages.side(options, device, role),
                    Thread.currentThread().getContextClassLoader());
        }
    }
}
