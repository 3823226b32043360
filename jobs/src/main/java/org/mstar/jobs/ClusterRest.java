package org.mstar.jobs;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * A Flink cluster's REST API, asked with GET: the one HTTP client of the benchmarks, serve's start-up, the cluster
 * tests and the chaos runs. A failed connection or a timeout is an {@link IOException}; callers that poll a
 * JobManager which may be down, frozen or starting say what that means to them.
 */
public final class ClusterRest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(2)).build();
    private final Supplier<String> url;
    private final Duration timeout;

    /**
     * @param url the endpoint, e.g. {@code http://127.0.0.1:8081}, asked anew for each request (a high-availability
     *     cluster's client moves to the standby)
     * @param timeout how long one request may take: a frozen JobManager accepts connections and never answers
     */
    public ClusterRest(Supplier<String> url, Duration timeout) {
        this.url = url;
        this.timeout = timeout;
    }

    /** {@code path} as JSON; a status other than 200 is an {@link IOException} naming it. */
    public JsonNode get(String path) throws IOException, InterruptedException {
        HttpResponse<String> r = send(path);
        if (r.statusCode() != 200) {
            throw new IOException("GET " + url.get() + path + ": " + r.statusCode() + " " + r.body());
        }
        return JSON.readTree(r.body());
    }

    /** {@code path} as JSON; empty while the API does not know it (yet). */
    public Optional<JsonNode> find(String path) throws IOException, InterruptedException {
        HttpResponse<String> r = send(path);
        return r.statusCode() == 200 ? Optional.of(JSON.readTree(r.body())) : Optional.empty();
    }

    /** The body of {@code path} whatever its status; "" when nothing answered. */
    public String bodyOrEmpty(String path) throws InterruptedException {
        try {
            return send(path).body();
        } catch (IOException unreachable) {
            return "";
        }
    }

    private HttpResponse<String> send(String path) throws IOException, InterruptedException {
        return http.send(HttpRequest.newBuilder(URI.create(url.get() + path)).timeout(timeout).build(),
                HttpResponse.BodyHandlers.ofString());
    }
}
