package org.mstar.jobs.chaos;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.mstar.flink.Responses;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateResult;
import org.mstar.schemas.Response;

/**
 * Everything a read_committed consumer sees on the responses topic from its beginning, in the order it sees it,
 * repeats included: the checker must see what a user would, not a cleaned-up view.
 */
final class CommittedResponses implements Runnable {
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final AtomicBoolean stopped = new AtomicBoolean();
    final List<Seen> seen = new CopyOnWriteArrayList<>();

    /** One response as read, with where and when; {@code response} is null for a record that is not one. */
    record Seen(Response response, int partition, long offset, long readAtMillis) {
        String requestId() {
            return response == null ? null : Responses.requestId(response);
        }

        boolean ends() {
            return response != null
                    && (response.getEvent() instanceof GenerateResult || response.getEvent() instanceof ErrorEvent);
        }
    }

    CommittedResponses(String bootstrapServers, String topic) {
        consumer = new KafkaConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers,
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false),
                new ByteArrayDeserializer(), new ByteArrayDeserializer());
        List<TopicPartition> partitions = new ArrayList<>();
        consumer.partitionsFor(topic, Duration.ofMinutes(1))
                .forEach(p -> partitions.add(new TopicPartition(topic, p.partition())));
        consumer.assign(partitions);
        consumer.seekToBeginning(partitions);
    }

    @Override
    public void run() {
        try {
            while (!stopped.get()) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    seen.add(new Seen(decode(r.value()), r.partition(), r.offset(), System.currentTimeMillis()));
                }
            }
        } finally {
            consumer.close();
        }
    }

    void stop() {
        stopped.set(true);
    }

    private static Response decode(byte[] value) {
        try {
            return Response.fromByteBuffer(ByteBuffer.wrap(value));
        } catch (Exception e) {
            return null;
        }
    }
}
