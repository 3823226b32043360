package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** When serve may say it is running. */
class TasksStartedTest {
    /** A job whose one task still initialises. */
    private static final String NOT_YET_RUNNING =
            "{\"vertices\": [{\"id\": \"v\", \"parallelism\": 1, \"tasks\": {\"RUNNING\": 0}}]}";

    @Test
    void aClusterThatStopsAnsweringWhileItsJobFailsGivesTheFailureNotARunningLine() throws IOException {
        CompletableFuture<Object> ended = new CompletableFuture<>();
        AtomicInteger requests = new AtomicInteger();
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/", exchange -> {
            if (requests.incrementAndGet() == 1) {
                byte[] body = NOT_YET_RUNNING.getBytes(StandardCharsets.UTF_8);
                exchange.sendResponseHeaders(200, body.length);
                exchange.getResponseBody().write(body);
                exchange.close();
            } else {
                // the local cluster shuts down as its job fails: the job's result comes after the REST endpoint went
                ended.completeExceptionally(new IllegalStateException("the model could not be loaded"));
                exchange.close();
            }
        });
        server.start();
        try {
            String url = "http://127.0.0.1:" + server.getAddress().getPort();
            assertThatThrownBy(() -> TasksStarted.await(url, "job", 1, ended))
                    .isInstanceOf(ExecutionException.class).hasMessageContaining("the model could not be loaded");
        } finally {
            server.stop(0);
        }
    }
}
