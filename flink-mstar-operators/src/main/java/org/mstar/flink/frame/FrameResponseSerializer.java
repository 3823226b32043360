package org.mstar.flink.frame;

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
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.FrameEvent;
import org.mstar.schemas.FrameResponse;

/** Writes each {@link FrameResponse} Avro single-object encoded, keyed by session id so a session's frames stay in order. */
final class FrameResponseSerializer implements KafkaRecordSerializationSchema<FrameResponse>, KafkaDatasetFacetProvider {
    private static final long serialVersionUID = 1L;

    private final String topic;

    FrameResponseSerializer(String topic) {
        this.topic = topic;
    }

    /** Names the topic, which the POOLING transaction naming needs to find transactions left open on it. */
    @Override
    public Optional<KafkaDatasetFacet> getKafkaDatasetFacet() {
        return Optional.of(new DefaultKafkaDatasetFacet(DefaultKafkaDatasetIdentifier.ofTopics(List.of(topic))));
    }

    @Override
    public ProducerRecord<byte[], byte[]> serialize(FrameResponse response, KafkaSinkContext context, Long timestamp) {
        String id = sessionId(response);
        byte[] key = id == null ? null : id.getBytes(StandardCharsets.UTF_8);
        try {
            ByteBuffer buffer = FrameResponse.getEncoder().encode(response);
            byte[] value = new byte[buffer.remaining()];
            buffer.get(value);
            return new ProducerRecord<>(topic, null, timestamp, key, value);
        } catch (IOException e) {
            throw new IllegalStateException("cannot encode a frame response of session " + id, e);
        }
    }

    static String sessionId(FrameResponse response) {
        Object event = response.getEvent();
        return event instanceof FrameEvent f ? f.getSessionId() : ((ErrorEvent) event).getRequestId();
    }
}
