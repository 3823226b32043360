package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
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
import org.mstar.schemas.TokenEvent;

/** Produces requests to and reads committed responses from the test broker; checks of what was read. */
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
     * Reads the whole topic as a read_committed consumer and tests {@code done} each time it has caught up with the
     * topic's end (so never on a past state of it), until {@code done} holds; fails when {@code timeout} passes first.
     */
    TestRequests.Collected readUntil(String topic, Predicate<TestRequests.Collected> done, Duration timeout)
            throws Exception {
        TestRequests.Collected collected = new TestRequests.Collected();
        try (KafkaConsumer<byte[], byte[]> consumer = consumer()) {
            List<TopicPartition> partitions = partitions(consumer, topic);
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long deadline = System.nanoTime() + timeout.toNanos();
            while (true) {
                Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
                do { // at least one poll, which waits up to 100 ms for more
                    for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(100))) {
                        collected.add(Response.fromByteBuffer(ByteBuffer.wrap(record.value())));
                    }
                } while (partitions.stream().anyMatch(p -> consumer.position(p) < ends.get(p)));
                if (done.test(collected)) {
                    return collected;
                }
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("timed out reading " + topic + ": " + collected.resultCount()
                            + " results, " + collected.errors.size() + " errors");
                }
            }
        }
    }

    /** Reads the whole topic as a read_committed consumer, up to its end (last stable offsets) at the call. */
    TestRequests.Collected readAll(String topic) throws IOException {
        TestRequests.Collected collected = new TestRequests.Collected();
        try (KafkaConsumer<byte[], byte[]> consumer = consumer()) {
            List<TopicPartition> partitions = partitions(consumer, topic);
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            while (partitions.stream().anyMatch(p -> consumer.position(p) < ends.get(p))) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(100))) {
                    collected.add(Response.fromByteBuffer(ByteBuffer.wrap(record.value())));
                }
            }
        }
        return collected;
    }

    /** End offsets of each partition of {@code topic}. */
    Map<TopicPartition, Long> endOffsets(String topic) {
        try (KafkaConsumer<byte[], byte[]> consumer = consumer()) {
            return consumer.endOffsets(partitions(consumer, topic));
        }
    }

    /**
     * What an at-least-once consumer keeps: the first TokenEvent per (request_id, index) and the first result per
     * request, after checking that every repeat is identical to what it repeats (timings aside).
     */
    static TestRequests.Collected firstOfEach(TestRequests.Collected raw) {
        TestRequests.Collected kept = new TestRequests.Collected();
        raw.tokens.forEach((id, events) -> {
            Map<Integer, TokenEvent> byIndex = new TreeMap<>();
            for (TokenEvent e : events) {
                TokenEvent first = byIndex.putIfAbsent(e.getIndex(), e);
                assertThat(first == null || first.equals(e)).as("repeat of %s[%s]", id, e.getIndex()).isTrue();
            }
            kept.tokens.put(id, new ArrayList<>(byIndex.values()));
        });
        raw.results.forEach((id, results) -> {
            assertThat(results).as("results of %s", id)
                    .usingRecursiveFieldByFieldElementComparatorIgnoringFields("timings")
                    .containsOnly(results.get(0));
            kept.results.put(id, List.of(results.get(0)));
        });
        kept.errors.addAll(raw.errors);
        return kept;
    }

    private KafkaConsumer<byte[], byte[]> consumer() {
        return new KafkaConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers,
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false), new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    private static List<TopicPartition> partitions(KafkaConsumer<?, ?> consumer, String topic) {
        return consumer.partitionsFor(topic).stream().map(p -> new TopicPartition(topic, p.partition())).toList();
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
