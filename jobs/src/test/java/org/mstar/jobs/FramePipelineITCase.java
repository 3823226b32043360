package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.jobs.CancelledJobs.cancel;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.engine.frame.FrameEngine;
import org.mstar.engine.frame.FrameInput;
import org.mstar.flink.frame.FrameModelEngineFactory;
import org.mstar.flink.frame.FrameOptions;
import org.mstar.flink.frame.FramePipeline;
import org.mstar.model.frame.FrameModel;
import org.mstar.model.frame.FrameModelConfig;
import org.mstar.resources.RingKVLayerConfig;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.FrameEvent;
import org.mstar.schemas.FrameRequest;
import org.mstar.schemas.FrameRequestKind;
import org.mstar.schemas.FrameResponse;

/**
 * The frame-session job on a Flink MiniCluster (RocksDB state) between topics of an in-process Kafka broker, on a
 * small random frame model: several sessions at once, more than the rings (so some wait), a failure injected
 * mid-session and a rescale through a savepoint; each session's committed frames must equal what one engine
 * stepping that session alone, uninterrupted, predicts.
 */
class FramePipelineITCase {
    private static final Duration TIMEOUT = Duration.ofSeconds(90);
    private static final FrameModelConfig CONFIG = new FrameModelConfig(40, 32, 4, 2, 8, 64, 128, 4, 1e-5, 10000,
            List.of(new RingKVLayerConfig(2, 2, 1), new RingKVLayerConfig(3, 2, 2)));
    private static final int SESSIONS = 6;
    private static final int FRAMES = 12;

    @RegisterExtension
    static final MiniClusterExtension FLINK = new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
            .setNumberTaskManagers(1).setNumberSlotsPerTaskManager(4).build());

    @RegisterExtension
    static final KafkaBrokerExtension KAFKA = new KafkaBrokerExtension();

    @TempDir
    Path tmp;

    @Test
    void committedFramesAfterAFailureMidSessionEqualAnUninterruptedRun() throws Exception {
        Job job = new Job("frames-fail");
        Map<String, List<FrameRequest>> requests = requests("f");
        Map<String, List<List<Integer>>> expected = reference(requests);
        produce(job.requests, requests, 0, 7);

        Configuration conf = job.config();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofMillis(100));
        JobClient client = job.start(conf, 2);
        // committed frames mean a checkpoint holds sessions mid-way; the failure then hits the next step
        readUntil(job.frames, 8);
        job.faults.failNextStep();
        produce(job.requests, requests, 7, FRAMES + 2);
        Map<String, List<FrameEvent>> out = readUntil(job.frames, SESSIONS * (FRAMES + 1)).frames;
        cancel(client);

        assertThat(job.faults.failures()).isEqualTo(1);
        assertThat(job.faults.replays()).as("sessions rebuilt by replay after the restore").isPositive();
        assertFrames(out, expected);
    }

    @Test
    void aSavepointAtParallelismTwoResumesEverySessionAtOne() throws Exception {
        Job job = new Job("frames-rescale");
        Map<String, List<FrameRequest>> requests = requests("r");
        Map<String, List<List<Integer>>> expected = reference(requests);
        produce(job.requests, requests, 0, 7);

        JobClient first = job.start(job.config(), 2);
        readUntil(job.frames, 10);
        String savepoint = first.stopWithSavepoint(false, tmp.resolve("savepoints").toUri().toString(),
                SavepointFormatType.CANONICAL).get();

        produce(job.requests, requests, 7, FRAMES + 2);
        Configuration conf = job.config();
        conf.set(StateRecoveryOptions.SAVEPOINT_PATH, savepoint);
        JobClient second = job.start(conf, 1);
        Map<String, List<FrameEvent>> out = readUntil(job.frames, SESSIONS * (FRAMES + 1)).frames;
        cancel(second);

        assertThat(job.faults.replays()).as("sessions rebuilt by replay after the restore").isPositive();
        assertFrames(out, expected);
    }

    @Test
    void recordsASessionCannotTakeGetA400AndTheOthersGoOn() throws Exception {
        Job job = new Job("frames-bad");
        Map<String, List<FrameRequest>> good = requests("g");
        good.keySet().retainAll(List.of("g-0", "g-1"));
        Map<String, List<List<Integer>>> expected = reference(good);
        List<FrameRequest> bad = List.of(
                frame("bad-unopened", FrameRequestKind.FRAME, 1, List.of(), 0),
                frame("bad-tokens", FrameRequestKind.OPEN, 0, List.of(1, 2, 3), 0),
                frame("bad-action", FrameRequestKind.OPEN, 0, tokens(new Random(1)), 9));
        try (KafkaProducer<byte[], byte[]> p = producer()) {
            for (FrameRequest r : bad) send(p, job.requests, r);
            send(p, job.requests, frame("g-0", FrameRequestKind.FRAME, 3, List.of(), 0)); // before its OPEN
            p.send(new ProducerRecord<>(job.requests, "bad-bytes".getBytes(StandardCharsets.UTF_8),
                    "not avro".getBytes(StandardCharsets.UTF_8))).get();
        }
        produce(job.requests, good, 0, FRAMES + 2);
        Configuration conf = job.config();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        JobClient client = job.start(conf, 1);
        Collected out = readUntil(job.frames, 2 * (FRAMES + 1));
        Collected all = readUntilErrors(job.frames, 5);
        cancel(client);

        assertFrames(out.frames, expected);
        assertThat(all.errors).extracting(ErrorEvent::getRequestId)
                .containsExactlyInAnyOrder("bad-unopened", "bad-tokens", "bad-action", "g-0", "bad-bytes");
        assertThat(all.errors).allSatisfy(e -> assertThat(e.getCode()).isEqualTo(400));
    }

    // ------------------------------------------------------------------------

    /** Per session: OPEN with frame 0, FRAME 1..FRAMES feeding predictions back (every fourth one observed), CLOSE. */
    private static Map<String, List<FrameRequest>> requests(String prefix) {
        Map<String, List<FrameRequest>> out = new TreeMap<>();
        Random random = new Random(prefix.hashCode());
        for (int s = 0; s < SESSIONS; s++) {
            String id = prefix + "-" + s;
            List<FrameRequest> rs = new ArrayList<>();
            rs.add(frame(id, FrameRequestKind.OPEN, 0, tokens(random), random.nextInt(CONFIG.numActions())));
            for (int f = 1; f <= FRAMES; f++) {
                List<Integer> observed = f % 4 == 0 ? tokens(random) : List.of();
                rs.add(frame(id, FrameRequestKind.FRAME, f, observed, random.nextInt(CONFIG.numActions())));
            }
            rs.add(frame(id, FrameRequestKind.CLOSE, 0, List.of(), 0));
            out.put(id, rs);
        }
        return out;
    }

    private static FrameRequest frame(String id, FrameRequestKind kind, int index, List<Integer> tokens, int action) {
        return FrameRequest.newBuilder().setSessionId(id).setKind(kind).setFrameIndex(index).setTokens(tokens)
                .setAction(action).build();
    }

    private static List<Integer> tokens(Random random) {
        List<Integer> t = new ArrayList<>();
        for (int i = 0; i < CONFIG.tokensPerFrame(); i++) t.add(random.nextInt(CONFIG.vocabSize()));
        return t;
    }

    /** What one engine predicts stepping each session alone, uninterrupted. */
    private Map<String, List<List<Integer>>> reference(Map<String, List<FrameRequest>> requests) throws Exception {
        Map<String, List<List<Integer>>> out = new HashMap<>();
        try (FrameModel model = FrameModel.load(modelDir(), new CpuDevice(1), DType.F32)) {
            for (Map.Entry<String, List<FrameRequest>> e : requests.entrySet()) {
                List<List<Integer>> frames = new ArrayList<>();
                try (FrameEngine engine = new FrameEngine(model, 1)) {
                    engine.open(e.getKey());
                    int[] last = null;
                    for (FrameRequest r : e.getValue()) {
                        if (r.getKind() == FrameRequestKind.CLOSE) break;
                        int[] in = r.getTokens().isEmpty() ? last : r.getTokens().stream().mapToInt(i -> i).toArray();
                        last = engine.step(List.of(new FrameInput(e.getKey(), r.getFrameIndex(), in, r.getAction())), false)
                                .get(0).tokens();
                        frames.add(java.util.Arrays.stream(last).boxed().toList());
                    }
                }
                out.put(e.getKey(), frames);
            }
        }
        return out;
    }

    private static void assertFrames(Map<String, List<FrameEvent>> out, Map<String, List<List<Integer>>> expected) {
        assertThat(out.keySet()).containsExactlyInAnyOrderElementsOf(expected.keySet());
        expected.forEach((id, frames) -> {
            List<FrameEvent> got = out.get(id);
            assertThat(got).extracting(FrameEvent::getFrameIndex).as("frame indices of %s", id)
                    .containsExactlyElementsOf(java.util.stream.IntStream.rangeClosed(1, frames.size()).boxed().toList());
            assertThat(got).extracting(FrameEvent::getTokens).as("frames of %s", id).containsExactlyElementsOf(frames);
        });
    }

    private Path modelDir() throws Exception {
        Path dir = tmp.resolve("frame-model");
        if (!dir.resolve(FrameModelConfig.FILE).toFile().exists()) {
            // projections wide enough that each predicted frame depends on the history its rings hold
            try (FrameModel model = FrameModel.random(CONFIG, new CpuDevice(1), DType.F32, 21, 0.5)) {
                model.weights().save(CONFIG, dir);
            }
        }
        return dir;
    }

    /** Produces records {@code [from, to)} of every session, sessions interleaved, keyed by session id. */
    private static void produce(String topic, Map<String, List<FrameRequest>> requests, int from, int to) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = producer()) {
            for (int i = from; i < to; i++) {
                for (List<FrameRequest> rs : requests.values()) if (i < rs.size()) send(p, topic, rs.get(i));
            }
        }
    }

    private static void send(KafkaProducer<byte[], byte[]> p, String topic, FrameRequest r) throws Exception {
        ByteBuffer b = r.toByteBuffer();
        byte[] value = new byte[b.remaining()];
        b.get(value);
        p.send(new ProducerRecord<>(topic, r.getSessionId().getBytes(StandardCharsets.UTF_8), value)).get();
    }

    private static KafkaProducer<byte[], byte[]> producer() {
        return new KafkaProducer<>(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, KAFKA.broker().bootstrapServers(),
                ProducerConfig.ACKS_CONFIG, "all"), new ByteArraySerializer(), new ByteArraySerializer());
    }

    /** What a read_committed consumer of the frames topic saw. */
    private static final class Collected {
        final Map<String, List<FrameEvent>> frames = new TreeMap<>();
        final List<ErrorEvent> errors = new ArrayList<>();

        int frameCount() {
            return frames.values().stream().mapToInt(List::size).sum();
        }
    }

    private static Collected readUntil(String topic, int frames) throws Exception {
        return read(topic, c -> c.frameCount() >= frames);
    }

    private static Collected readUntilErrors(String topic, int errors) throws Exception {
        return read(topic, c -> c.errors.size() >= errors);
    }

    private static Collected read(String topic, java.util.function.Predicate<Collected> done) throws Exception {
        Collected c = new Collected();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, KAFKA.broker().bootstrapServers(),
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false), new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
                    .map(p -> new TopicPartition(topic, p.partition())).toList();
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long deadline = System.nanoTime() + TIMEOUT.toNanos();
            while (!done.test(c)) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("timed out reading " + topic + ": " + c.frameCount() + " frames, "
                            + c.errors.size() + " errors");
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(100))) {
                    Object event = FrameResponse.fromByteBuffer(ByteBuffer.wrap(record.value())).getEvent();
                    if (event instanceof FrameEvent f) {
                        c.frames.computeIfAbsent(f.getSessionId(), k -> new ArrayList<>()).add(f);
                    } else {
                        c.errors.add((ErrorEvent) event);
                    }
                }
            }
        }
        return c;
    }


    /** One test's topics, transactional ids and engine factory (two rings per subtask, so some sessions wait). */
    private final class Job {
        final String name;
        final String requests;
        final String frames;
        FaultyFrameEngineFactory faults;

        Job(String name) throws Exception {
            this.name = name;
            this.requests = name + "-requests";
            this.frames = name + "-frames";
            KAFKA.broker().createTopics(4, requests, frames);
        }

        Configuration config() throws Exception {
            Configuration conf = new Configuration();
            conf.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
            conf.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, true);
            conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, tmp.resolve("checkpoints").toUri().toString());
            conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(100));
            conf.set(FrameOptions.MODEL_DIR, modelDir().toString());
            conf.set(FrameOptions.RESIDENT_SESSIONS, 2);
            if (faults == null) faults = new FaultyFrameEngineFactory(name, new FrameModelEngineFactory(conf));
            return conf;
        }

        JobClient start(Configuration conf, int parallelism) throws Exception {
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
            env.setParallelism(parallelism);
            new FramePipeline().bootstrapServers(KAFKA.broker().bootstrapServers()).requestsTopic(requests).framesTopic(frames)
                    .groupId(name).transactionalIdPrefix("tx-" + name).engineFactory(faults).addTo(env);
            return env.executeAsync("mstar " + name);
        }
    }
}
