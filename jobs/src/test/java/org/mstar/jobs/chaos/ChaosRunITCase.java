package org.mstar.jobs.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A one-minute chaos run: one fault of each kind under load, then the exactly-once check. Tagged "chaos", out of
 * the default build (it takes minutes of child JVMs); the longer runs are {@code scripts/chaos/chaos-run.sh}'s.
 */
@Tag("chaos")
class ChaosRunITCase {
    @TempDir
    Path tmp;

    @Test
    void oneFaultOfEachKindLeavesEveryRequestEndedOnceWithTheReferenceTokens() throws Exception {
        int port;
        try (ServerSocket free = new ServerSocket(0)) {
            port = free.getLocalPort();
        }
        boolean passed = ChaosRun.run(Map.of("dir", tmp.resolve("run").toString(), "seconds", "60", "rate", "2",
                "seed", "3", "faults-each", "1", "port", Integer.toString(port), "tail-seconds", "120"));

        assertThat(passed).as("the chaos run's check (its summary is in the test's output)").isTrue();
    }
}
