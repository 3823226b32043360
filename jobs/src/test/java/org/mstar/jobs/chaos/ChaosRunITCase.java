package org.mstar.jobs.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The five-minute chaos run of the default build: one fault of every kind {@code mstar serve} in one process takes,
 * in a seeded order (some overlapping the next), under a request a second, then the exactly-once check. Three to
 * five minutes on two cores, start-up and the reference run included (most of it the broker's restarts); the
 * hour-long runs are {@code scripts/chaos/chaos-run.sh}'s. Without root the state directory's disk cannot be filled, and that kind is
 * left out (the run says so).
 */
class ChaosRunITCase {
    @TempDir
    Path tmp;

    @Test
    void oneFaultOfEachKindLeavesEveryRequestEndedOnceWithTheReferenceTokens() throws Exception {
        int port;
        try (ServerSocket free = new ServerSocket(0)) {
            port = free.getLocalPort();
        }
        boolean passed = ChaosRun.run(Map.of("dir", tmp.resolve("run").toString(), "seconds", "30", "rate", "1",
                "seed", "3", "faults-each", "1", "max-gap-seconds", "2", "port", Integer.toString(port),
                "tail-seconds", "120"));

        assertThat(passed).as("the chaos run's check (its summary is in the test's output)").isTrue();
    }
}
