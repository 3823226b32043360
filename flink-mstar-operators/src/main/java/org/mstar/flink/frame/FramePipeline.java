package org.mstar.flink.frame;

import java.time.Duration;
import java.util.Properties;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.KafkaSinkBuilder;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.types.Either;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.mstar.flink.KafkaClientProperties;
import org.mstar.flink.OutageTolerantKafkaSink;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.FrameRequest;
import org.mstar.schemas.FrameResponse;

/**
 * The frame-session job: frame requests from Kafka → keyBy(session id) → {@link FrameSessionOperator} → frames
 * (and 400s for undecodable records) to Kafka, exactly once by default. Operator uids are fixed, so a savepoint
 * restores into a job of any parallelism.
 */
public final class FramePipeline {
    static final String SOURCE_UID = "mstar-frame-requests";
    static final String DECODE_UID = "mstar-frame-decode";
    static final String SESSIONS_UID = "mstar-frame-sessions";
    static final String SINK_UID = "mstar-frames";
    private static final OutputTag<FrameResponse> UNDECODABLE =
            new OutputTag<>("undecodable", new AvroTypeInfo<>(FrameResponse.class));

    private String bootstrapServers;
    private String requestsTopic;
    private String framesTopic;
    private String groupId = "mstar-frames";
    private String transactionalIdPrefix = "mstar-frames";
    private DeliveryGuarantee guarantee = DeliveryGuarantee.EXACTLY_ONCE;
    private final Duration transactionTimeout = Duration.ofMinutes(10);
    private final OffsetsInitializer startingOffsets = OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST);
    private FrameEngineFactory engineFactory;
    private String device = "cpu";
    private final Properties kafkaProperties = new Properties();

    public FramePipeline bootstrapServers(String v) { bootstrapServers = v; return this; }
    public FramePipeline requestsTopic(String v) { requestsTopic = v; return this; }
    public FramePipeline framesTopic(String v) { framesTopic = v; return this; }
    public FramePipeline groupId(String v) { groupId = v; return this; }
    public FramePipeline transactionalIdPrefix(String v) { transactionalIdPrefix = v; return this; }
    public FramePipeline deliveryGuarantee(DeliveryGuarantee v) { guarantee = v; return this; }
    public FramePipeline engineFactory(FrameEngineFactory v) { engineFactory = v; return this; }
    public FramePipeline device(String v) { device = v; return this; }
    /** A Kafka client property of the source and the sink, as {@link KafkaClientProperties} describes them. */
    public FramePipeline kafkaProperty(String key, String value) {
        kafkaProperties.setProperty(key, value);
        return this;
    }

    /** Adds the job to {@code env}; returns what goes to the frames topic. */
    public DataStream<FrameResponse> addTo(StreamExecutionEnvironment env) {
        if (bootstrapServers == null || requestsTopic == null || framesTopic == null || engineFactory == null) {
            throw new IllegalStateException("a frame pipeline needs bootstrap servers, both topics and an engine factory");
        }
        if (guarantee == DeliveryGuarantee.EXACTLY_ONCE && !env.getCheckpointConfig().isCheckpointingEnabled()) {
            throw new IllegalStateException("EXACTLY_ONCE commits frames when checkpoints complete: enable"
                    + " checkpointing ('execution.checkpointing.interval') or choose AT_LEAST_ONCE.");
        }
        KafkaSource<Either<ErrorEvent, FrameRequest>> source = KafkaSource.<Either<ErrorEvent, FrameRequest>>builder()
                .setBootstrapServers(bootstrapServers)
                .setTopics(requestsTopic)
                .setGroupId(groupId)
                .setStartingOffsets(startingOffsets)
                .setDeserializer(new FrameRequestDeserializer())
                .setProperties(KafkaClientProperties.withConfigProviders(kafkaProperties))
                // records of aborted transactions were never sent
                .setProperty("isolation.level", "read_committed")
                .build();
        SingleOutputStreamOperator<FrameRequest> decoded = env
                .fromSource(source, WatermarkStrategy.noWatermarks(), "mstar frame requests").uid(SOURCE_UID)
                .process(new Split()).name("mstar frame decode").uid(DECODE_UID);
        DataStream<FrameResponse> frames = decoded
                .keyBy(FrameRequest::getSessionId, Types.STRING)
                .transform("mstar frame sessions", new AvroTypeInfo<>(FrameResponse.class),
                        new FrameSessionOperatorFactory(engineFactory, device))
                .uid(SESSIONS_UID);
        DataStream<FrameResponse> out = frames.union(decoded.getSideOutput(UNDECODABLE));
        out.sinkTo(new OutageTolerantKafkaSink<>(sink())).name("mstar frames").uid(SINK_UID);
        return out;
    }

    private KafkaSink<FrameResponse> sink() {
        KafkaSinkBuilder<FrameResponse> b = KafkaSink.<FrameResponse>builder()
                .setBootstrapServers(bootstrapServers)
                .setRecordSerializer(new FrameResponseSerializer(framesTopic))
                .setKafkaProducerConfig(KafkaClientProperties.withConfigProviders(kafkaProperties))
                .setDeliveryGuarantee(guarantee);
        if (guarantee == DeliveryGuarantee.EXACTLY_ONCE) {
            // Flink's 1 h default exceeds the broker's transaction.max.timeout.ms (15 min) and fails the job
            b.setTransactionalIdPrefix(transactionalIdPrefix)
                    .setProperty("transaction.timeout.ms", Long.toString(transactionTimeout.toMillis()));
        }
        return b.build();
    }

    /** Decoded requests go on; undecodable records become their 400 on the side output. */
    private static final class Split extends ProcessFunction<Either<ErrorEvent, FrameRequest>, FrameRequest> {
        private static final long serialVersionUID = 1L;

        @Override
        public void processElement(Either<ErrorEvent, FrameRequest> value, Context ctx, Collector<FrameRequest> out) {
            if (value.isRight()) {
                out.collect(value.right());
            } else {
                ctx.output(UNDECODABLE, new FrameResponse(value.left()));
            }
        }
    }
}
