package org.mstar.flink;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;
import org.apache.flink.connector.kafka.lineage.DefaultKafkaDatasetFacet;
import org.apache.flink.connector.kafka.lineage.DefaultKafkaDatasetIdentifier;
import org.apache.flink.connector.kafka.lineage.KafkaDatasetFacet;
import org.apache.flink.connector.kafka.lineage.KafkaDatasetFacetProvider;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.mstar.schemas.Response;

/**
 * Writes each {@link Response} to one topic, Avro single-object encoded ({@code Response.fromByteBuffer} reads
 * it), keyed by request id so one request's events share a partition and stay in order.
 */
final class ResponseSerializer implements KafkaRecordSerializationSchema<Response>, KafkaDatasetFacetProvider {
    private static final long serialVersionUID = 1L;

    private final String topic;

    ResponseSerializer(String topic) {
        this.topic = topic;
    }

    /** Names the topic, which the POOLING transaction naming needs to find transactions left open on it. */
    @Override
    public Optional<KafkaDatasetFacet> getKafkaDatasetFacet() {
        return Optional.of(new DefaultKafkaDatasetFacet(DefaultKafkaDatasetIdentifier.ofTopics(List.of(topic))));
    }

    @Override
    public ProducerRecord<byte[], byte[]> serialize(Response response, KafkaSinkContext context, Long timestamp) {
        String id = Responses.requestId(response);
        byte[] key = id == null ? null : id.getBytes(StandardCharsets.UTF_8);
        try {
            ByteBuffer buffer = Response.getEncoder().encode(response);
            byte[] value = new byte[buffer.remaining()];
            buffer.get(value);
            return new ProducerRecord<>(topic, null, timestamp, key, value);
        } catch (IOException e) {
            throw new IllegalStateException("cannot encode a response of request " + id, e);
        }
    }
}
