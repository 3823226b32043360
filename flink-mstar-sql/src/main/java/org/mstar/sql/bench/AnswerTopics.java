package org.mstar.sql.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The SQL side's client: JSON prompts into one topic, JSON answers read from another as a {@code read_committed}
 * consumer sees them (so under exactly-once an answer counts when its checkpoint commits it), each topic of one
 * partition. One thread uses it.
 */
final class AnswerTopics implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final String prompts;
    private final KafkaProducer<String, String> producer;
    private final KafkaConsumer<String, String> consumer;

    AnswerTopics(String bootstrapServers, String prompts, String answers) throws Exception {
        this.prompts = prompts;
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrapServers))) {
            admin.createTopics(List.of(new NewTopic(prompts, 1, (short) 1), new NewTopic(answers, 1, (short) 1)))
                    .all().get();
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrapServers);
        producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrapServers);
        c.put("isolation.level", "read_committed");
        consumer = new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer());
        TopicPartition partition = new TopicPartition(answers, 0);
        consumer.assign(List.of(partition));
        consumer.seekToBeginning(List.of(partition));
    }

    /** The records of {@code rows} as JSON, made before the clock starts. */
    static List<String> json(List<Map<String, Object>> rows) throws Exception {
        List<String> out = new ArrayList<>(rows.size());
        for (Map<String, Object> row : rows) {
            out.add(JSON.writeValueAsString(row));
        }
        return out;
    }

    /** Sends every record and waits until the broker has them all. */
    void send(List<String> records) throws Exception {
        List<Future<?>> sent = new ArrayList<>(records.size());
        for (String r : records) {
            sent.add(producer.send(new ProducerRecord<>(prompts, r)));
        }
        producer.flush();
        for (Future<?> f : sent) {
            f.get();
        }
    }

    /** Hands each committed answer to {@code answer} with the time it was read, for at most {@code wait}. */
    void poll(Duration wait, AnswerHandler answer) throws Exception {
        for (ConsumerRecord<String, String> r : consumer.poll(wait)) {
            answer.accept(JSON.readTree(r.value()), System.nanoTime());
        }
    }

    /** What reads an answer. */
    @FunctionalInterface
    interface AnswerHandler {
        void accept(JsonNode answer, long readNanos) throws Exception;
    }

    @Override
    public void close() {
        producer.close();
        consumer.close();
    }
}
