package org.mstar.jobs;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code mstar kafka}: a single-node Kafka broker in this process until Ctrl-C or SIGTERM, so that {@code serve} and
 * {@code send} run on one machine with nothing installed. For trying things out: one node, no replication, no
 * security, 127.0.0.1 only.
 */
@Command(name = "kafka", mixinStandardHelpOptions = true,
        description = "Run a single-node Kafka broker on this machine (127.0.0.1 only) until stopped.")
final class KafkaCommand implements Callable<Integer> {
    @Option(names = "--port", paramLabel = "PORT", description = "Port of the broker. Default: ${DEFAULT-VALUE}.")
    int port = 9092;

    @Option(names = "--data-dir", paramLabel = "DIR",
            description = "Topics, offsets and transactions; kept, so a restarted broker has them again."
                    + " Default: ${DEFAULT-VALUE} in the working directory.")
    Path dataDir = Path.of("mstar-kafka");

    @Option(names = "--partitions", paramLabel = "N",
            description = "Partitions of the topics it creates (requests, responses). Default: ${DEFAULT-VALUE}.")
    int partitions = 1;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        PrintWriter err = spec.commandLine().getErr();
        EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start(dataDir, port);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                broker.close();
            } catch (Exception e) {
                System.err.println("stopping the broker: " + e.getMessage());
            } finally {
                stopped.countDown();
            }
        }, "mstar-kafka-stop"));
        KafkaCheck.topics(broker.bootstrapServers(), List.of("requests", "responses"), true, partitions);
        err.println("Kafka broker running at " + broker.bootstrapServers() + " (data in " + broker.dataDir()
                + "; topics requests and responses ready). Ctrl-C stops it.");
        err.flush();
        stopped.await();
        return 0;
    }
}
