package org.mstar.jobs;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.mstar.flink.TestRequests;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.Response;

/** Produces requests to and reads committed responses from the test broker. */
final class KafkaTestSupport {
    private final String bootstrapServers;

    KafkaTestSupport(String bootstrapServers) {
        this.bootstrapServers = bootstrapServers;
    }

    void produce(String topic, List<GenerateRequest> requests) throws Exception {
        try (KafkaProducer<byte[], byte[]> producer = producer()) {
            for (GenerateRequest r : requests) {
                producer.send(new ProducerRecord<>(topic, utf8(r.getRequestId()), bytes(r))).get();
            }
        }
    }

    /** Produces records as given, keys and values included, in order. */
    void produceRaw(String topic, List<Map.Entry<String, byte[]>> records) throws Exception {
        try (KafkaProducer<byte[], byte[]> producer = producer()) {
            for (Map.Entry<String, byte[]> r : records) {
                producer.send(new ProducerRecord<>(topic, 0, utf8(r.getKey()), r.getValue())).get();
            }
        }
    }

    /**
     * Reads the whole topic as a read_committed consumer until {@code done} holds for what was read, or fails
     * when {@code timeout} passes first.
     */
    TestRequests.Collected readUntil(String topic, Predicate<TestRequests.Collected> done, Duration timeout)
            throws Exception {
        TestRequests.Collected collected = new TestRequests.Collected();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers,
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false), new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
                    .map(p -> new TopicPartition(topic, p.partition())).toList();
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long deadline = System.nanoTime() + timeout.toNanos();
            while (!done.test(collected)) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("timed out reading " + topic + ": " + collected.resultCount()
                            + " results, " + collected.errors.size() + " errors");
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(100))) {
                    collected.add(Response.fromByteBuffer(ByteBuffer.wrap(record.value())));
                }
            }
        }
        return collected;
    }

    static byte[] bytes(GenerateRequest request) throws Exception {
        ByteBuffer b = request.toByteBuffer();
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }

    private KafkaProducer<byte[], byte[]> producer() {
        return new KafkaProducer<>(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers,
                ProducerConfig.ACKS_CONFIG, "all"), new ByteArraySerializer(), new ByteArraySerializer());
    }

    private static byte[] utf8(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }
}
