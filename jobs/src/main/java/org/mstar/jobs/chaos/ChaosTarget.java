package org.mstar.jobs.chaos;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * What a chaos run attacks: {@code mstar kafka} and {@code mstar serve --random}, each a child process, restarted
 * with the same command (the broker on the same port and data directory, serve on the same state directory).
 */
final class ChaosTarget implements AutoCloseable {
    static final String BROKER_UP = "Kafka broker running at";
    static final String SERVE_UP = "mstar serve is running:";
    static final String RESUMING = "Resuming from checkpoint";
    private static final Duration START_TIMEOUT = Duration.ofMinutes(3);

    private final Path dir;
    private final int port;
    private final List<String> serveOptions;
    private MstarProcess broker;
    private MstarProcess serve;
    private int brokerStarts;
    private int serveStarts;

    /** @param serveOptions options of serve beyond the broker, model and state directory (-D settings) */
    ChaosTarget(Path dir, int port, List<String> serveOptions) {
        this.dir = dir;
        this.port = port;
        this.serveOptions = serveOptions;
    }

    String bootstrapServers() {
        return "localhost:" + port;
    }

    void startBroker() throws IOException, InterruptedException {
        broker = MstarProcess.start(dir.resolve("kafka-" + ++brokerStarts + ".log"),
                List.of("kafka", "--port", Integer.toString(port), "--data-dir", dir.resolve("kafka-data").toString()));
        broker.awaitLine(BROKER_UP, START_TIMEOUT);
    }

    void killBroker() throws InterruptedException {
        broker.kill();
    }

    /** Starts serve and returns once its console says it started (and, unless fresh, whether it resumes). */
    MstarProcess startServe() throws IOException, InterruptedException {
        List<String> args = new ArrayList<>(List.of("serve", "--random",
                "--bootstrap-servers", bootstrapServers(), "--device", "cpu",
                "--state-dir", dir.resolve("state").toString()));
        args.addAll(serveOptions);
        serve = MstarProcess.start(dir.resolve("serve-" + ++serveStarts + ".log"), args);
        return serve;
    }

    MstarProcess serve() {
        return serve;
    }

    int serveStarts() {
        return serveStarts;
    }

    /** The logs' lines that tell of errors or lost data, for the summary. */
    List<String> alarmingLogLines() throws IOException {
        try (var logs = Files.list(dir)) {
            return logs.filter(f -> f.getFileName().toString().endsWith(".log")).sorted().flatMap(f -> {
                try {
                    return Files.readAllLines(f).stream().filter(l -> l.contains("data loss"))
                            .map(l -> f.getFileName() + ": " + l);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }).toList();
        }
    }

    @Override
    public void close() throws InterruptedException {
        if (serve != null) {
            serve.kill();
        }
        if (broker != null) {
            broker.kill();
        }
    }
}
