package org.mstar.flink;

import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.TransactionNamingStrategy;

/**
 * Where a {@link GenerationPipeline} reads requests and writes responses. Each key has a '-', so that the other keys
 * under {@code mstar.kafka.} are Kafka client properties ({@link KafkaClientProperties}).
 */
@PublicEvolving
public final class KafkaIoOptions {
    private KafkaIoOptions() {}

    public static final ConfigOption<String> BOOTSTRAP_SERVERS = ConfigOptions.key("mstar.kafka.bootstrap-servers")
            .stringType()
            .noDefaultValue()
            .withDescription("Kafka bootstrap servers, host:port[,host:port...].");

    public static final ConfigOption<String> REQUESTS_TOPIC = ConfigOptions.key("mstar.kafka.requests-topic")
            .stringType()
            .defaultValue("requests")
            .withDescription("Topic of GenerateRequest records (Avro single-object encoding, key = request id).");

    public static final ConfigOption<String> RESPONSES_TOPIC = ConfigOptions.key("mstar.kafka.responses-topic")
            .stringType()
            .defaultValue("responses")
            .withDescription("Topic the Response records go to (Avro single-object encoding, key = request id).");

    public static final ConfigOption<String> GROUP_ID = ConfigOptions.key("mstar.kafka.group-id")
            .stringType()
            .defaultValue("mstar")
            .withDescription("Consumer group of the requests source. Offsets live in Flink's checkpoints; the group"
                    + " only reports progress and gives a fresh job its starting point.");

    public static final ConfigOption<DeliveryGuarantee> DELIVERY_GUARANTEE =
            ConfigOptions.key("mstar.kafka.delivery-guarantee")
                    .enumType(DeliveryGuarantee.class)
                    .defaultValue(DeliveryGuarantee.EXACTLY_ONCE)
                    .withDescription("EXACTLY_ONCE writes responses in Kafka transactions committed on checkpoints"
                            + " (consumers read with isolation.level=read_committed and see them after each"
                            + " checkpoint). AT_LEAST_ONCE writes at once; after a restore a consumer may see"
                            + " responses again and drops TokenEvents whose (request_id, index) it has seen.");

    public static final ConfigOption<String> TRANSACTIONAL_ID_PREFIX =
            ConfigOptions.key("mstar.kafka.transactional-id-prefix")
                    .stringType()
                    .noDefaultValue()
                    .withDescription("Prefix of the sink's transactional ids, required with EXACTLY_ONCE. It must be"
                            + " unique among the jobs writing to the Kafka cluster and stay the same when a job"
                            + " resumes from a savepoint.");

    public static final ConfigOption<TransactionNamingStrategy> TRANSACTION_NAMING =
            ConfigOptions.key("mstar.kafka.transaction-naming")
                    .enumType(TransactionNamingStrategy.class)
                    .defaultValue(TransactionNamingStrategy.POOLING)
                    .withDescription("How the EXACTLY_ONCE sink names its transactions. POOLING reuses a few ids per"
                            + " subtask (the broker keeps every id it has seen for transactional.id.expiration.ms,"
                            + " 7 days by default) and finds transactions left open by a crash by listing them,"
                            + " which needs Kafka 3.0+ and, on a cluster with ACLs, read access to the responses"
                            + " topic and to the transactional ids."
                            + " INCREMENTING takes a new id per checkpoint, as connector 3.x did; switching from"
                            + " POOLING to INCREMENTING on restored state is not supported.");

    public static final ConfigOption<Duration> TRANSACTION_TIMEOUT = ConfigOptions.key("mstar.kafka.transaction-timeout")
            .durationType()
            .defaultValue(Duration.ofMinutes(10))
            .withDescription("transaction.timeout.ms of the sink's producers. It must exceed the longest time between"
                    + " two completed checkpoints plus restart time, and stay under the broker's"
                    + " transaction.max.timeout.ms (15 min by default).");

    /** The keys of the options above. */
    static List<String> keys() {
        return Stream.of(BOOTSTRAP_SERVERS, REQUESTS_TOPIC, RESPONSES_TOPIC, GROUP_ID, DELIVERY_GUARANTEE,
                TRANSACTIONAL_ID_PREFIX, TRANSACTION_NAMING, TRANSACTION_TIMEOUT).map(ConfigOption::key).toList();
    }
}
