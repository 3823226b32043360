package org.mstar.jobs;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Stream;
import kafka.server.KafkaConfig;
import kafka.server.KafkaRaftServer;
import kafka.tools.StorageTool;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.utils.Time;

/**
 * A single-node Kafka cluster (KRaft, combined broker and controller) inside this JVM, for {@code mstar kafka}, the
 * demo and the tests. It listens on 127.0.0.1 only and supports transactions (replication factor 1 everywhere).
 * {@link #start()} keeps its data in a temporary folder deleted by {@link #close}; {@link #start(Path, int)} in a
 * folder that outlives it, so topics, offsets and transactions survive a restart.
 */
public final class EmbeddedKafkaBroker implements AutoCloseable {
    private final Path dir;
    private final boolean temporary;
    private final String bootstrapServers;
    private final KafkaRaftServer server;

    private EmbeddedKafkaBroker(Path dir, boolean temporary, String bootstrapServers, KafkaRaftServer server) {
        this.dir = dir;
        this.temporary = temporary;
        this.bootstrapServers = bootstrapServers;
        this.server = server;
    }

    /** Formats a fresh log folder in a temporary folder, starts the server at a free port and waits until it answers. */
    public static EmbeddedKafkaBroker start() throws Exception {
        return start(Files.createTempDirectory("mstar-kafka-"), freePort(), true, null);
    }

    /**
     * A listener beside PLAINTEXT (which {@link #bootstrapServers()}, {@link #admin()} and the broker itself keep
     * using), such as a SASL_SSL one.
     *
     * @param name listener name, upper case
     * @param settings broker settings it needs ({@code listener.name.<name>.*}, {@code sasl.enabled.mechanisms}, ...)
     * @param formatArgs what formatting the log folder adds for it, such as {@code --add-scram} credentials
     */
    record Listener(String name, String protocol, int port, Map<String, String> settings, List<String> formatArgs) {}

    /** {@link #start()} with {@code extra} listening too. */
    static EmbeddedKafkaBroker start(Listener extra) throws Exception {
        return start(Files.createTempDirectory("mstar-kafka-"), freePort(), true, extra);
    }

    /**
     * Starts the server on {@code port} with its data in {@code dir}, formatting the folder when it holds none yet
     * (else resuming what it holds), and waits until it answers. {@link #close} keeps the folder.
     *
     * @throws IllegalStateException when {@code port} is taken
     */
    public static EmbeddedKafkaBroker start(Path dir, int port) throws Exception {
        try (ServerSocket probe = new ServerSocket(port, 1, InetAddress.getByName("127.0.0.1"))) {
            probe.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException("port " + port + " on 127.0.0.1 is taken (another Kafka?): " + e.getMessage());
        }
        Files.createDirectories(dir);
        return start(dir.toAbsolutePath(), port, false, null);
    }

    private static EmbeddedKafkaBroker start(Path dir, int brokerPort, boolean temporary, Listener extra)
            throws Exception {
        int controllerPort = freePort();
        String extraListener = extra == null ? "" : "," + extra.name() + "://127.0.0.1:" + extra.port();
        Properties p = new Properties();
        p.putAll(Map.ofEntries(
                Map.entry("process.roles", "broker,controller"),
                Map.entry("node.id", "1"),
                Map.entry("controller.quorum.voters", "1@127.0.0.1:" + controllerPort),
                Map.entry("listeners", "PLAINTEXT://127.0.0.1:" + brokerPort + extraListener
                        + ",CONTROLLER://127.0.0.1:" + controllerPort),
                Map.entry("advertised.listeners", "PLAINTEXT://127.0.0.1:" + brokerPort + extraListener),
                Map.entry("controller.listener.names", "CONTROLLER"),
                Map.entry("inter.broker.listener.name", "PLAINTEXT"),
                Map.entry("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
                        + (extra == null ? "" : "," + extra.name() + ":" + extra.protocol())),
                Map.entry("log.dirs", dir.resolve("logs").toString()),
                Map.entry("offsets.topic.replication.factor", "1"),
                Map.entry("offsets.topic.num.partitions", "4"),
                Map.entry("transaction.state.log.replication.factor", "1"),
                Map.entry("transaction.state.log.min.isr", "1"),
                Map.entry("transaction.state.log.num.partitions", "4"),
                Map.entry("share.coordinator.state.topic.replication.factor", "1"),
                Map.entry("share.coordinator.state.topic.min.isr", "1"),
                Map.entry("group.initial.rebalance.delay.ms", "0")));
        if (extra != null) {
            p.putAll(extra.settings());
        }
        Path config = dir.resolve("server.properties");
        try (OutputStream out = Files.newOutputStream(config)) {
            p.store(out, "mstar embedded broker");
        }
        if (!Files.exists(dir.resolve("logs").resolve("meta.properties"))) {
            ByteArrayOutputStream formatLog = new ByteArrayOutputStream();
            List<String> format = new ArrayList<>(List.of("format", "-t", Uuid.randomUuid().toString(), "-c",
                    config.toString()));
            if (extra != null) {
                format.addAll(extra.formatArgs());
            }
            int formatted = StorageTool.execute(format.toArray(String[]::new),
                    new PrintStream(formatLog, true, StandardCharsets.UTF_8));
            if (formatted != 0) {
                throw new IllegalStateException("kafka storage format failed: " + formatLog.toString(StandardCharsets.UTF_8));
            }
        }
        KafkaRaftServer server = new KafkaRaftServer(KafkaConfig.fromProps(p, false), Time.SYSTEM);
        server.startup();
        EmbeddedKafkaBroker broker = new EmbeddedKafkaBroker(dir, temporary, "127.0.0.1:" + brokerPort, server);
        try (Admin admin = broker.admin()) {
            admin.describeCluster().nodes().get();
        } catch (Exception e) {
            broker.close();
            throw e;
        }
        return broker;
    }

    public String bootstrapServers() {
        return bootstrapServers;
    }

    /** The folder of its data. */
    public Path dataDir() {
        return dir;
    }

    /** Creates each topic with {@code partitions} partitions. */
    public void createTopics(int partitions, String... topics) throws Exception {
        try (Admin admin = admin()) {
            admin.createTopics(Arrays.stream(topics).map(t -> new NewTopic(t, partitions, (short) 1)).toList())
                    .all().get();
        }
    }

    public Admin admin() {
        return Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers));
    }

    @Override
    public void close() throws IOException {
        try {
            server.shutdown();
            server.awaitShutdown();
        } finally {
            if (temporary) {
                try (Stream<Path> files = Files.walk(dir)) {
                    files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
                }
            }
        }
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
            return s.getLocalPort();
        }
    }
}
