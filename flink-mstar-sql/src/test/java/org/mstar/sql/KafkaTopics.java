package org.mstar.sql;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Predicate;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** JSON records in and out of the tests' topics: produced, and read back as a read_committed consumer sees them. */
final class KafkaTopics {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final String bootstrapServers;

    KafkaTopics(String bootstrapServers) {
        this.bootstrapServers = bootstrapServers;
    }

    void create(String... topics) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrapServers))) {
            admin.createTopics(java.util.Arrays.stream(topics).map(t -> new NewTopic(t, 1, (short) 1)).toList())
                    .all().get();
        }
    }

    void produce(String topic, List<Map<String, Object>> records) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrapServers);
        try (KafkaProducer<String, String> producer =
                     new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
            for (Map<String, Object> r : records) {
                sent.add(producer.send(new ProducerRecord<>(topic, JSON.writeValueAsString(r))));
            }
            for (java.util.concurrent.Future<?> f : sent) {
                f.get();
            }
        }
    }

    /** Every committed record of {@code topic} (one partition), read until {@code done} holds or the time is up. */
    List<JsonNode> readCommitted(String topic, Predicate<List<JsonNode>> done, Duration timeout) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrapServers);
        p.put("isolation.level", "read_committed");
        List<JsonNode> records = new ArrayList<>();
        long deadline = System.nanoTime() + timeout.toNanos();
        try (KafkaConsumer<String, String> consumer =
                     new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            while (!done.test(records) && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    records.add(JSON.readTree(r.value()));
                }
            }
        }
        return records;
    }

    /** How many distinct values of field {@code id} the records have. */
    static long distinctIds(List<JsonNode> records) {
        return records.stream().map(a -> a.get("id").asInt()).distinct().count();
    }
}
