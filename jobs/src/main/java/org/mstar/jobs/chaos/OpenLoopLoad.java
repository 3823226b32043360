package org.mstar.jobs.chaos;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.mstar.schemas.GenerateRequest;

/**
 * Sends requests at seeded exponential gaps (open loop: the next send does not wait for any answer) until stopped: mixed prompt and output lengths, greedy and seeded sampling, priorities 0 to 3. A request counts as sent
 * once the broker acknowledged it; one the producer gave up on is kept apart, since it may or may not be there.
 */
final class OpenLoopLoad implements Runnable {
    private static final String[] WORDS = {"river", "stone", "quiet", "seven", "lamp", "north", "bread", "glass",
            "winter", "copper", "song", "field", "orbit", "salt", "engine", "paper"};

    private final Random random;
    private final double perSecond;
    private final AtomicBoolean stopped = new AtomicBoolean();
    private final KafkaProducer<byte[], byte[]> producer;
    private final String topic;
    /** Acknowledged requests with the time each was handed to the producer, in send order. */
    final List<SentRequest> sent = new CopyOnWriteArrayList<>();
    final Map<String, String> unacknowledged = new ConcurrentHashMap<>();

    record SentRequest(GenerateRequest request, long sentAtMillis) {}

    OpenLoopLoad(long seed, double perSecond, String bootstrapServers, String topic) {
        this.random = new Random(seed);
        this.perSecond = perSecond;
        this.topic = topic;
        // Retries ride out a broker outage (idempotence keeps them from writing a request twice).
        this.producer = new KafkaProducer<>(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers,
                ProducerConfig.ACKS_CONFIG, "all",
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true,
                ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, (int) Duration.ofMinutes(5).toMillis(),
                ProducerConfig.MAX_BLOCK_MS_CONFIG, Duration.ofMinutes(5).toMillis()),
                new ByteArraySerializer(), new ByteArraySerializer());
    }

    @Override
    public void run() {
        long next = System.nanoTime();
        int n = 0;
        try {
            while (!stopped.get()) {
                long wait = next - System.nanoTime();
                if (wait > 0) {
                    TimeUnit.NANOSECONDS.sleep(wait); // the load's own seeded arrival time
                }
                send(request(n++));
                next += (long) (-Math.log(1 - random.nextDouble()) / perSecond * 1e9);
            }
            producer.flush();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot encode a request", e);
        } finally {
            producer.close();
        }
    }

    /** Ends the load after the send under way; {@link #run()} then flushes what the producer holds. */
    void stop() {
        stopped.set(true);
    }

    private void send(GenerateRequest request) throws IOException {
        ByteBuffer value = request.toByteBuffer();
        byte[] bytes = new byte[value.remaining()];
        value.get(bytes);
        long at = System.currentTimeMillis();
        producer.send(new ProducerRecord<>(topic, request.getRequestId().getBytes(StandardCharsets.UTF_8), bytes),
                (metadata, e) -> {
                    if (e == null) {
                        sent.add(new SentRequest(request, at));
                    } else {
                        unacknowledged.put(request.getRequestId(), e.toString());
                    }
                });
    }

    /** The n-th request: its kind, lengths and priority drawn from the run's seed. */
    private GenerateRequest request(int n) {
        StringBuilder prompt = new StringBuilder();
        int words = 1 + random.nextInt(random.nextInt(8) == 0 ? 120 : 24);
        for (int i = 0; i < words; i++) {
            prompt.append(i == 0 ? "" : " ").append(WORDS[random.nextInt(WORDS.length)]);
        }
        boolean greedy = random.nextBoolean();
        GenerateRequest.Builder b = GenerateRequest.newBuilder()
                .setRequestId("chaos-" + n)
                .setPrompt(prompt.toString())
                .setMaxTokens(random.nextInt(4) == 0 ? 40 + random.nextInt(60) : 1 + random.nextInt(24))
                .setIgnoreEos(random.nextBoolean())
                .setPriority(random.nextInt(4))
                .setMetadata(Map.of("kind", greedy ? "greedy" : "seeded"));
        if (greedy) {
            b.setTemperature(0.0);
        } else {
            b.setTemperature(0.5 + random.nextDouble()).setSeed(random.nextLong()).setTopK(random.nextInt(3) * 20);
        }
        return b.build();
    }
}
