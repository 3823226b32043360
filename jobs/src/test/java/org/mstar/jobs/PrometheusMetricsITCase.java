package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.flink.FakeEngineFactory;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import org.mstar.flink.TestRequests;
import org.mstar.schemas.GenerateRequest;

/**
 * The Prometheus endpoint as {@code serve --metrics-port} sets it up, scraped while a job serves on a MiniCluster:
 * every metric that docs/guides/deploy/metrics.md documents is there, with values that show the job's work, and every
 * metric the Grafana dashboard queries is a documented one.
 */
class PrometheusMetricsITCase {
    private static final Path DOC = Path.of("..", "docs", "guides", "deploy", "metrics.md");
    private static final Path DASHBOARD = Path.of("..", "docs", "guides", "deploy", "grafana-dashboard.json");
    private static final int PORT = freePort();

    @RegisterExtension
    static final MiniClusterExtension FLINK = new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
            .setConfiguration(reporter()).setNumberTaskManagers(1).setNumberSlotsPerTaskManager(2).build());

    @RegisterExtension
    static final KafkaBrokerExtension KAFKA = new KafkaBrokerExtension();

    @TempDir
    Path tmp;

    @Test
    void everyDocumentedMetricIsScrapedWhileTheJobServes() throws Exception {
        KAFKA.broker().createTopics(2, "m-requests", "m-responses");
        List<GenerateRequest> requests = TestRequests.requests("m", 12);
        GenerateRequest tooLong = TestRequests.request("m-too-long", 0); // the engine's 400
        tooLong.setPrompt("word ".repeat(FakeEngineFactory.CONTEXT_LENGTH));
        KAFKA.kafka().produce("m-requests", requests);
        KAFKA.kafka().produce("m-requests", List.of(tooLong));
        KAFKA.kafka().produceRaw("m-requests", List.of(Map.entry("m-garbage", new byte[] {1, 2, 3}))); // validation's
        Configuration conf = new Configuration();
        conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(100));
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, tmp.toUri().toString());
        conf.set(GenerateOptions.DEVICE, "cpu");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        GenerationPipeline.builder().bootstrapServers(KAFKA.broker().bootstrapServers()).requestsTopic("m-requests")
                .responsesTopic("m-responses").transactionalIdPrefix("tx-metrics")
                .engineFactory(new FakeEngineFactory(4, Duration.ofMillis(1))).build().addTo(env);
        JobClient job = env.executeAsync("mstar metrics");
        String scraped;
        try {
            // results are committed with a checkpoint, so one has completed once they are read
            KAFKA.kafka().readUntil("m-responses", c -> c.resultCount() >= requests.size() && c.errors.size() >= 2,
                    Duration.ofSeconds(90));
            scraped = scrape();
        } finally {
            job.cancel().get();
        }

        Set<String> documented = documented();
        assertThat(documented).hasSizeGreaterThan(10);
        Set<String> names = new TreeSet<>();
        Matcher m = Pattern.compile("(?m)^(flink_[A-Za-z0-9_]+?)(?:\\{|\\s)").matcher(scraped);
        while (m.find()) {
            names.add(m.group(1));
        }
        assertThat(names).containsAll(documented);
        assertThat(value(scraped, "flink_taskmanager_job_task_operator_mstar_tokensEmitted")).isPositive();
        assertThat(value(scraped, "flink_taskmanager_job_task_operator_mstar_timeToFirstTokenUs_count"))
                .isEqualTo(requests.size());
        assertThat(value(scraped, "flink_jobmanager_job_numberOfCompletedCheckpoints")).isPositive();
        assertThat(value(scraped, "flink_taskmanager_job_task_operator_mstar_code_errors")).isEqualTo(1);
        assertThat(value(scraped, "flink_taskmanager_job_task_operator_mstar_requestsRejected")).isEqualTo(1);
        assertThat(queried()).isNotEmpty().allSatisfy(q -> assertThat(documented).contains(q));
    }

    /** The Prometheus names in the documentation's tables (`flink_...` in back quotes). */
    private static Set<String> documented() throws IOException {
        return names(Files.readString(DOC), Pattern.compile("`(flink_[A-Za-z0-9_]+)`"));
    }

    /** The metrics the dashboard's queries name, histogram suffixes dropped. */
    private static Set<String> queried() throws IOException {
        Set<String> raw = names(Files.readString(DASHBOARD), Pattern.compile("(flink_[A-Za-z0-9_]+)"));
        Set<String> out = new LinkedHashSet<>();
        raw.forEach(n -> out.add(n.replaceAll("_(count|sum)$", "")));
        return out;
    }

    private static Set<String> names(String text, Pattern p) {
        Set<String> out = new LinkedHashSet<>();
        Matcher m = p.matcher(text);
        while (m.find()) {
            out.add(m.group(1));
        }
        return out;
    }

    /** The sum over all label sets of {@code name}'s samples. */
    private static double value(String scraped, String name) {
        Matcher m = Pattern.compile("(?m)^" + name + "(?:\\{[^}]*})? (\\S+)$").matcher(scraped);
        double sum = 0;
        while (m.find()) {
            sum += Double.parseDouble(m.group(1));
        }
        return sum;
    }

    private static String scrape() throws Exception {
        HttpClient http = HttpClient.newHttpClient();
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + PORT + "/metrics")).build(),
                HttpResponse.BodyHandlers.ofString()).body();
    }

    private static Configuration reporter() {
        Configuration conf = new Configuration();
        PrometheusEndpoint.configure(conf, PORT);
        return conf;
    }

    private static int freePort() {
        try {
            return EmbeddedKafkaBroker.freePort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
