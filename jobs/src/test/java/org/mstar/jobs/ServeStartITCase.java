package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * A fresh {@code mstar serve} as a user starts it: the real command line in a child JVM, with the command line's own
 * log configuration, against this test's broker; what its console shows until it says it runs.
 */
class ServeStartITCase {
    private static final long START_TIMEOUT_SECONDS = 120;

    @TempDir
    static Path dir;
    @RegisterExtension
    static final KafkaBrokerExtension KAFKA = new KafkaBrokerExtension();
    private static Process serve;
    /** The console's lines (stdout and stderr), as they come. */
    private static final List<String> CONSOLE = Collections.synchronizedList(new ArrayList<>());
    private static final CountDownLatch RUNNING = new CountDownLatch(1);

    @BeforeAll
    static void startServe() throws Exception {
        Path model = dir.resolve("model");
        RandomModel.writeBundledGeometry(model, 5);
        List<String> command = MstarChildProcess.command(List.of("serve", "--bootstrap-servers", KAFKA.broker().bootstrapServers(), "--model", model.toString(),
                "--device", "cpu", "--state-dir", dir.resolve("state").toString(),
                "-Dio.tmp.dirs=" + dir.resolve("io")));
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
        pb.environment().put("OPT_OUT_TRACKING", "true");
        serve = pb.start();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(serve.getInputStream(),
                    StandardCharsets.UTF_8))) {
                for (String line = in.readLine(); line != null; line = in.readLine()) {
                    CONSOLE.add(line);
                    if (line.startsWith("mstar serve is running")) {
                        RUNNING.countDown();
                    }
                }
            } catch (java.io.IOException ended) {
                // the process was killed: its console ends here
            }
        }, "serve console");
        reader.setDaemon(true);
        reader.start();
        assertThat(RUNNING.await(START_TIMEOUT_SECONDS, TimeUnit.SECONDS)).as("serve said it runs; its console:%n%s",
                String.join("\n", CONSOLE)).isTrue();
    }

    @AfterAll
    static void stopServe() throws Exception {
        if (serve != null) {
            serve.destroyForcibly().waitFor();
        }
        System.out.println("==== serve's console\n" + String.join("\n", CONSOLE));
    }

    @Test
    void theConsoleShowsTheWeightsLoadingBeforeItSaysItRuns() {
        List<String> lines = List.copyOf(CONSOLE);
        int running = indexOf(lines, "mstar serve is running");
        int loading = indexOf(lines, "Loading the weights of " + dir.resolve("model") + " on cpu");
        int loaded = indexOf(lines, "Loaded the weights of " + dir.resolve("model") + " on cpu in ");
        assertThat(loading).as("the loading line; console:%n%s", String.join("\n", lines)).isNotNegative();
        assertThat(loaded).isGreaterThan(loading).isLessThan(running);
        // a few lines, not a flood: the weights are loaded once for the device, whatever the subtasks
        assertThat(lines.stream().filter(l -> l.contains("the weights of"))).hasSize(2);
    }

    private static int indexOf(List<String> lines, String text) {
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).contains(text)) {
                return i;
            }
        }
        return -1;
    }
}
