package org.mstar.jobs;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.mstar.flink.KafkaClientProperties;
import org.mstar.flink.Responses;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.GenerateResult;
import org.mstar.schemas.Response;
import org.mstar.schemas.TokenEvent;

/**
 * Sends requests to a generation job and follows their responses. It starts reading the responses topic at
 * its end when created, so it sees only responses to what it sends after that; it reads committed data only
 * and passes each TokenEvent once per (request_id, index) and one final event per request, so it reads the
 * output of exactly-once and at-least-once jobs alike.
 */
public final class GenerateClient implements AutoCloseable {
    private final String requestsTopic;
    private final KafkaProducer<byte[], byte[]> producer;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final Set<String> seenTokens = new HashSet<>();
    private final Set<String> done = new HashSet<>();

    public GenerateClient(String bootstrapServers, String requestsTopic, String responsesTopic) {
        this(bootstrapServers, new Properties(), requestsTopic, responsesTopic);
    }

    /** @param client Kafka client properties of its producer and consumer ({@link KafkaClientProperties}) */
    public GenerateClient(String bootstrapServers, Properties client, String requestsTopic, String responsesTopic) {
        this.requestsTopic = requestsTopic;
        producer = new KafkaProducer<>(with(client, Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers,
                ProducerConfig.ACKS_CONFIG, "all",
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true)),
                new ByteArraySerializer(), new ByteArraySerializer());
        consumer = new KafkaConsumer<>(with(client, Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers,
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false)),
                new ByteArrayDeserializer(), new ByteArrayDeserializer());
        List<TopicPartition> partitions = consumer.partitionsFor(responsesTopic, Duration.ofSeconds(30)).stream()
                .map(p -> new TopicPartition(p.topic(), p.partition())).toList();
        if (partitions.isEmpty()) {
            throw new IllegalArgumentException("responses topic '" + responsesTopic + "' does not exist");
        }
        consumer.assign(partitions);
        consumer.seekToEnd(partitions);
        partitions.forEach(consumer::position); // resolves the lazy seek before anything is sent
    }

    /** {@code client}'s properties (with its config providers declared) and {@code own} over them. */
    private static Properties with(Properties client, Map<String, Object> own) {
        Properties p = KafkaClientProperties.withConfigProviders(client);
        p.putAll(own);
        return p;
    }

    /** Sends one request, keyed by its id. */
    public void send(GenerateRequest request) throws Exception {
        ByteBuffer value = request.toByteBuffer();
        byte[] bytes = new byte[value.remaining()];
        value.get(bytes);
        producer.send(new ProducerRecord<>(requestsTopic, request.getRequestId().getBytes(StandardCharsets.UTF_8), bytes))
                .get();
    }

    /**
     * Sends {@code requests} without waiting between them, then waits until the broker has every one.
     *
     * @param onSend told each request id just before it is handed to the producer
     */
    public void sendAll(List<GenerateRequest> requests, Consumer<String> onSend) throws Exception {
        List<Future<?>> acks = new ArrayList<>();
        for (GenerateRequest request : requests) {
            ByteBuffer value = request.toByteBuffer();
            byte[] bytes = new byte[value.remaining()];
            value.get(bytes);
            onSend.accept(request.getRequestId());
            acks.add(producer.send(new ProducerRecord<>(requestsTopic,
                    request.getRequestId().getBytes(StandardCharsets.UTF_8), bytes)));
        }
        for (Future<?> ack : acks) {
            ack.get();
        }
    }

    /**
     * Passes responses to {@code listener} until every id in {@code ids} has its result or error.
     *
     * @return the ids still unfinished when {@code timeout} ran out (empty when all finished)
     */
    public Set<String> await(Set<String> ids, Duration timeout, Consumer<Response> listener) {
        Set<String> open = new HashSet<>(ids);
        open.removeAll(done);
        pollUntil(open::isEmpty, timeout, response -> {
            listener.accept(response);
            Object event = response.getEvent();
            if (event instanceof GenerateResult || event instanceof ErrorEvent) {
                open.remove(Responses.requestId(response));
            }
        });
        return open;
    }

    /**
     * Passes responses to {@code listener} until {@code finished} holds or {@code timeout} runs out. A request's
     * TokenEvents can be read after its result: in a disaggregated job the first comes through the prefill
     * operator's sink and the rest through the decode operator's.
     *
     * @return whether {@code finished} held
     */
    public boolean pollUntil(BooleanSupplier finished, Duration timeout, Consumer<Response> listener) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!finished.getAsBoolean() && System.nanoTime() < deadline) {
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(100))) {
                Response response = decode(record.value());
                if (response != null && firstTime(response)) {
                    listener.accept(response);
                }
            }
        }
        return finished.getAsBoolean();
    }

    /** Drops repeats, which an at-least-once job produces after a restore. */
    private boolean firstTime(Response response) {
        Object event = response.getEvent();
        String id = Responses.requestId(response);
        if (event instanceof TokenEvent t) {
            return seenTokens.add(id + "\u0000" + t.getIndex());
        }
        return id == null || done.add(id);
    }

    private static Response decode(byte[] value) {
        try {
            return Response.fromByteBuffer(ByteBuffer.wrap(value));
        } catch (Exception e) {
            return null; // not a response of ours
        }
    }

    @Override
    public void close() {
        producer.close();
        consumer.close();
    }
}
