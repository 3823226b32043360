package org.mstar.jobs;

import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import org.apache.commons.io.FileUtils;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
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
import picocli.CommandLine;

/**
 * Runs {@code mstar frames}: a Kafka broker and a Flink MiniCluster in this process, the frame-session job on them
 * (exactly once, RocksDB state), then every session's OPEN, its action records (each feeding the last predicted
 * frame back) and its CLOSE; prints each frame as it is committed.
 */
final class FramesDemo {
    /** The random model's geometry: 2 layers, one keeping 4 frames, one every second frame in 2 slots. */
    static final FrameModelConfig RANDOM = new FrameModelConfig(256, 64, 4, 2, 16, 128, 128, 8, 1e-5, 10000,
            List.of(new RingKVLayerConfig(4, 4, 1), new RingKVLayerConfig(2, 2, 2)));

    private FramesDemo() {}

    /** @return the exit code: 0 when every session's every frame arrived and no error did */
    static int run(FramesCommand flags, CommandLine cli) throws Exception {
        PrintWriter out = cli.getOut();
        PrintWriter err = cli.getErr();
        if (flags.writeRandom != null) {
            writeRandom(Path.of(flags.writeRandom));
            err.println("Wrote a random frame model to " + flags.writeRandom);
            return 0;
        }
        Path work = Files.createTempDirectory("mstar-frames-");
        try (EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start()) {
            Path model = flags.model != null ? Path.of(flags.model) : writeRandom(work.resolve("random-frame-model"));
            if (flags.model == null) err.println("No --model: serving a small random frame model; its frames are noise.");
            FrameModelConfig config = FrameModelConfig.read(model);
            broker.createTopics(Math.max(1, flags.parallelism), "frame-requests", "frames");
            Configuration conf = new Configuration();
            conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(500));
            conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, work.resolve("checkpoints").toUri().toString());
            conf.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
            conf.set(FrameOptions.MODEL_DIR, model.toString());
            conf.set(FrameOptions.RESIDENT_SESSIONS, flags.resident);
            conf.set(FrameOptions.DTYPE, flags.dtype);
            StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(flags.parallelism, conf);
            new FramePipeline().bootstrapServers(broker.bootstrapServers()).requestsTopic("frame-requests")
                    .framesTopic("frames").device(flags.device).engineFactory(new FrameModelEngineFactory(conf)).addTo(env);
            JobClient job = env.executeAsync("mstar frames");
            CompletableFuture<JobExecutionResult> ended = job.getJobExecutionResult();
            try {
                err.println("Sending " + flags.sessions + " sessions of " + (flags.frames + 1) + " frames ("
                        + config.tokensPerFrame() + " tokens each), " + flags.resident + " rings per subtask.");
                err.flush();
                send(broker.bootstrapServers(), config, flags.sessions, flags.frames);
                return receive(broker.bootstrapServers(), flags.sessions * (flags.frames + 1),
                        Duration.ofSeconds(flags.timeoutSeconds), ended, out, err);
            } finally {
                if (!ended.isDone()) {
                    job.cancel().get();
                }
            }
        } finally {
            FileUtils.deleteDirectory(work.toFile());
        }
    }

    static Path writeRandom(Path dir) throws Exception {
        // projections wide enough that frames vary and depend on the history the rings hold
        try (CpuDevice cpu = new CpuDevice(1); FrameModel model = FrameModel.random(RANDOM, cpu, DType.F32, 1, 0.5)) {
            model.weights().save(RANDOM, dir);
        }
        return dir;
    }

    private static void send(String bootstrap, FrameModelConfig config, int sessions, int frames) throws Exception {
        Random random = new Random(7);
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ProducerConfig.ACKS_CONFIG, "all"), new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int s = 0; s < sessions; s++) {
                String id = "session-" + s;
                List<Integer> first = new ArrayList<>();
                for (int t = 0; t < config.tokensPerFrame(); t++) first.add(random.nextInt(config.vocabSize()));
                send(p, request(id, FrameRequestKind.OPEN, 0, first, random.nextInt(config.numActions())));
                for (int f = 1; f <= frames; f++) {
                    send(p, request(id, FrameRequestKind.FRAME, f, List.of(), random.nextInt(config.numActions())));
                }
                send(p, request(id, FrameRequestKind.CLOSE, 0, List.of(), 0));
            }
        }
    }

    private static FrameRequest request(String id, FrameRequestKind kind, int index, List<Integer> tokens, int action) {
        return FrameRequest.newBuilder().setSessionId(id).setKind(kind).setFrameIndex(index).setTokens(tokens)
                .setAction(action).build();
    }

    private static void send(KafkaProducer<byte[], byte[]> p, FrameRequest r) throws Exception {
        ByteBuffer b = r.toByteBuffer();
        byte[] value = new byte[b.remaining()];
        b.get(value);
        p.send(new ProducerRecord<>("frame-requests", r.getSessionId().getBytes(StandardCharsets.UTF_8), value)).get();
    }

    /** Prints the frames as they come; throws the job's failure when it stops first (a model or device that fails). */
    private static int receive(String bootstrap, int expected, Duration timeout,
                               CompletableFuture<JobExecutionResult> ended, PrintWriter out, PrintWriter err)
            throws Exception {
        Map<String, Integer> perSession = new TreeMap<>();
        int frames = 0;
        int errors = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false), new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> partitions = consumer.partitionsFor("frames").stream()
                    .map(pi -> new TopicPartition("frames", pi.partition())).toList();
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long deadline = System.nanoTime() + timeout.toNanos();
            while (frames < expected && System.nanoTime() < deadline) {
                if (ended.isDone()) {
                    ended.get();
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    Object event = FrameResponse.fromByteBuffer(ByteBuffer.wrap(record.value())).getEvent();
                    if (event instanceof FrameEvent f) {
                        frames++;
                        perSession.merge(f.getSessionId(), 1, Integer::sum);
                        out.printf("%s frame %d: %s ...%n", f.getSessionId(), f.getFrameIndex(),
                                f.getTokens().subList(0, Math.min(8, f.getTokens().size())));
                    } else {
                        errors++;
                        ErrorEvent e = (ErrorEvent) event;
                        out.printf("%s error %d: %s%n", e.getRequestId(), e.getCode(), e.getMessage());
                    }
                    out.flush();
                }
            }
        }
        err.println(frames + " of " + expected + " frames, " + errors + " errors; per session " + perSession);
        return frames == expected && errors == 0 ? 0 : 1;
    }
}
