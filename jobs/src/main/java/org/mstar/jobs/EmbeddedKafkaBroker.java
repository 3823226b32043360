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
import java.util.Arrays;
import java.util.Comparator;
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
 * A single-node Kafka cluster (KRaft, combined broker and controller) inside this JVM, for the demo and the
 * tests. It listens on 127.0.0.1 only, at free ports, keeps its data in a temporary folder deleted by
 * {@link #close}, and supports transactions (replication factor 1 everywhere).
 */
public final class EmbeddedKafkaBroker implements AutoCloseable {
    private final Path dir;
    private final String bootstrapServers;
    private final KafkaRaftServer server;

    private EmbeddedKafkaBroker(Path dir, String bootstrapServers, KafkaRaftServer server) {
        this.dir = dir;
        this.bootstrapServers = bootstrapServers;
        this.server = server;
    }

    /** Formats a fresh log folder, starts the server and waits until it answers. */
    public static EmbeddedKafkaBroker start() throws Exception {
        Path dir = Files.createTempDirectory("mstar-kafka-");
        int brokerPort = freePort();
        int controllerPort = freePort();
        Properties p = new Properties();
        p.putAll(Map.ofEntries(
                Map.entry("process.roles", "broker,controller"),
                Map.entry("node.id", "1"),
                Map.entry("controller.quorum.voters", "1@127.0.0.1:" + controllerPort),
                Map.entry("listeners", "PLAINTEXT://127.0.0.1:" + brokerPort + ",CONTROLLER://127.0.0.1:" + controllerPort),
                Map.entry("advertised.listeners", "PLAINTEXT://127.0.0.1:" + brokerPort),
                Map.entry("controller.listener.names", "CONTROLLER"),
                Map.entry("inter.broker.listener.name", "PLAINTEXT"),
                Map.entry("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"),
                Map.entry("log.dirs", dir.resolve("logs").toString()),
                Map.entry("offsets.topic.replication.factor", "1"),
                Map.entry("offsets.topic.num.partitions", "4"),
                Map.entry("transaction.state.log.replication.factor", "1"),
                Map.entry("transaction.state.log.min.isr", "1"),
                Map.entry("transaction.state.log.num.partitions", "4"),
                Map.entry("share.coordinator.state.topic.replication.factor", "1"),
                Map.entry("share.coordinator.state.topic.min.isr", "1"),
                Map.entry("group.initial.rebalance.delay.ms", "0")));
        Path config = dir.resolve("server.properties");
        try (OutputStream out = Files.newOutputStream(config)) {
            p.store(out, "mstar embedded broker");
        }
        ByteArrayOutputStream formatLog = new ByteArrayOutputStream();
        int formatted = StorageTool.execute(new String[] {"format", "-t", Uuid.randomUuid().toString(), "-c",
                config.toString()}, new PrintStream(formatLog, true, StandardCharsets.UTF_8));
        if (formatted != 0) {
            throw new IllegalStateException("kafka storage format failed: " + formatLog.toString(StandardCharsets.UTF_8));
        }
        KafkaRaftServer server = new KafkaRaftServer(KafkaConfig.fromProps(p, false), Time.SYSTEM);
        server.startup();
        EmbeddedKafkaBroker broker = new EmbeddedKafkaBroker(dir, "127.0.0.1:" + brokerPort, server);
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
            try (Stream<Path> files = Files.walk(dir)) {
                files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
            }
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
            return s.getLocalPort();
        }
    }
}
