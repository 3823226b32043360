package org.mstar.jobs.chaos;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * {@code mstar kafka} as a child process, started again with the same command: the same port and data directory,
 * as a broker restarted by its operator comes back.
 */
final class ChaosBroker implements AutoCloseable {
    static final String UP = "Kafka broker running at";
    private static final Duration START_TIMEOUT = Duration.ofMinutes(3);

    private final Path dir;
    private final int port;
    private MstarProcess process;
    private int starts;

    ChaosBroker(Path dir, int port) {
        this.dir = dir;
        this.port = port;
    }

    String bootstrapServers() {
        return "localhost:" + port;
    }

    void start() throws IOException, InterruptedException {
        process = MstarProcess.start(dir.resolve("kafka-" + ++starts + ".log"),
                List.of("kafka", "--port", Integer.toString(port), "--data-dir", dir.resolve("kafka-data").toString()));
        process.awaitLine(UP, START_TIMEOUT);
    }

    MstarProcess process() {
        return process;
    }

    @Override
    public void close() throws InterruptedException {
        if (process != null) {
            process.kill();
        }
    }
}
