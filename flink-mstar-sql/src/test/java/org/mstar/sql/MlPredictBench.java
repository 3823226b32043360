package org.mstar.sql;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.stream.IntStream;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import org.mstar.jobs.EmbeddedKafkaBroker;
import org.mstar.jobs.GenerateClient;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.GenerateResult;

/**
 * Throughput of the same load through {@code ML_PREDICT} (Kafka JSON table in, Kafka table out) and through the
 * DataStream job ({@link GenerationPipeline}: Kafka Avro requests in, responses out), on one in-process broker, both
 * at-least-once with RocksDB checkpoints every second, the same engine options and the same greedy prompts. Each job
 * is started and warmed up first; a run is the wall time from producing every prompt at once to the last answer a
 * read_committed consumer receives, and tokens/s is generated tokens over it. The sides alternate, run by run,
 * after a first round of both that warms up the JIT and is not counted.
 *
 * <pre>
 * mvn -B -pl flink-mstar-sql -am test -Dtest=MlPredictBench -Dsurefire.failIfNoSpecifiedTests=false -Dmstar.bench=true \
 *     [-Dbench.rows=64 -Dbench.max-tokens=32 -Dbench.runs=3 -Dbench.device=cpu]
 * </pre>
 * The table is printed and written to {@code flink-mstar-sql/target/ml-predict-bench.md}.
 */
@EnabledIfSystemProperty(named = "mstar.bench", matches = "true")
class MlPredictBench {
    private static final int ROWS = Integer.getInteger("bench.rows", 64);
    private static final int MAX_TOKENS = Integer.getInteger("bench.max-tokens", 32);
    private static final int RUNS = Integer.getInteger("bench.runs", 3);
    private static final String DEVICE = System.getProperty("bench.device", "cpu");
    private static final Duration TIMEOUT = Duration.ofMinutes(10);

    private record Run(String side, int run, long tokens, double seconds) {
        double tokensPerSecond() {
            return tokens / seconds;
        }
    }

    @Test
    void mlPredictAgainstTheDataStreamJob() throws Exception {
        String model = RandomModels.folder(RandomModels.TINY).toString();
        List<String> prompts = TinyModel.prompts(ROWS);
        List<Run> runs = new ArrayList<>();
        try (EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start()) {
            dataStream(broker, model, prompts, 0); // round 0 warms up the JIT on both paths, and is not counted
            mlPredict(broker, prompts, 0);
            for (int run = 1; run <= RUNS; run++) {
                runs.add(dataStream(broker, model, prompts, run));
                runs.add(mlPredict(broker, prompts, run));
            }
        }
        String table = table(runs);
        System.out.print(table);
        java.nio.file.Files.writeString(java.nio.file.Path.of("target", "ml-predict-bench.md"), table);
        assertThat(runs).allSatisfy(r -> assertThat(r.tokens()).isPositive());
    }

    private static Configuration jobConfig() {
        Configuration c = new Configuration();
        c.setString("execution.checkpointing.interval", "1 s");
        c.setString("state.backend.type", "rocksdb");
        c.setString("parallelism.default", "1");
        return c;
    }

    private static Run dataStream(EmbeddedKafkaBroker broker, String model, List<String> prompts, int run)
            throws Exception {
        String requests = "ds-requests-" + run;
        String responses = "ds-responses-" + run;
        broker.createTopics(1, requests, responses);
        Configuration conf = jobConfig();
        conf.set(GenerateOptions.MODEL_DIR, model);
        conf.set(GenerateOptions.DEVICE, DEVICE);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, conf);
        GenerationPipeline.builder().configure(conf).bootstrapServers(broker.bootstrapServers())
                .requestsTopic(requests).responsesTopic(responses).deliveryGuarantee(DeliveryGuarantee.AT_LEAST_ONCE)
                .build().addTo(env);
        JobClient job = env.executeAsync("bench datastream " + run);
        try (GenerateClient client = new GenerateClient(broker.bootstrapServers(), requests, responses)) {
            serve(client, List.of("warm up"), "warm-");
            long t0 = System.nanoTime();
            long tokens = serve(client, prompts, "r-");
            return new Run("DataStream job (GenerateOperator)", run, tokens, (System.nanoTime() - t0) / 1e9);
        } finally {
            job.cancel().get();
        }
    }

    /** Sends every prompt at once and waits for every result; returns the tokens generated. */
    private static long serve(GenerateClient client, List<String> prompts, String idPrefix) throws Exception {
        List<GenerateRequest> load = IntStream.range(0, prompts.size()).mapToObj(i -> GenerateRequest.newBuilder()
                .setRequestId(idPrefix + i).setPrompt(prompts.get(i)).setMaxTokens(MAX_TOKENS).setTemperature(0.0)
                .build()).toList();
        Set<String> ids = new LinkedHashSet<>(load.stream().map(GenerateRequest::getRequestId).toList());
        long[] tokens = {0};
        client.sendAll(load, id -> { });
        Set<String> unanswered = client.await(ids, TIMEOUT, response -> {
            if (response.getEvent() instanceof GenerateResult r) {
                tokens[0] += r.getTokenIds().size();
            }
        });
        assertThat(unanswered).isEmpty();
        return tokens[0];
    }

    private static Run mlPredict(EmbeddedKafkaBroker broker, List<String> prompts, int run) throws Exception {
        String in = "sql-prompts-" + run;
        String out = "sql-answers-" + run;
        broker.createTopics(1, in, out);
        TableEnvironment env = TableEnvironment.create(EnvironmentSettings.newInstance().inStreamingMode()
                .withConfiguration(jobConfig()).build());
        env.executeSql("CREATE TABLE prompts (id INT, prompt STRING) WITH ('connector' = 'kafka', 'topic' = '" + in
                + "', 'properties.bootstrap.servers' = '" + broker.bootstrapServers() + "',"
                + " 'properties.group.id' = 'bench', 'scan.startup.mode' = 'earliest-offset', 'format' = 'json')");
        env.executeSql("CREATE TABLE answers (id INT, completion_tokens INT) WITH ('connector' = 'kafka', 'topic' = '"
                + out + "', 'properties.bootstrap.servers' = '" + broker.bootstrapServers() + "', 'format' = 'json',"
                + " 'sink.delivery-guarantee' = 'at-least-once')");
        env.executeSql("CREATE TEMPORARY MODEL m INPUT (prompt STRING) OUTPUT (completion_tokens INT) WITH ("
                + TinyModel.with(Map.of("model.random", "tiny", "device", DEVICE, "temperature", "0",
                        "max-tokens", Integer.toString(MAX_TOKENS))) + ")");
        JobClient job = env.executeSql("INSERT INTO answers SELECT id, completion_tokens FROM ML_PREDICT(TABLE prompts,"
                + " MODEL m, DESCRIPTOR(prompt), MAP['max-concurrent-operations', '" + Math.max(ROWS, 1) + "'])")
                .getJobClient().orElseThrow();
        KafkaTopics kafka = new KafkaTopics(broker.bootstrapServers());
        try {
            kafka.produce(in, List.of(Map.of("id", -1, "prompt", "warm up")));
            kafka.readCommitted(out, r -> !r.isEmpty(), TIMEOUT);
            long t0 = System.nanoTime();
            kafka.produce(in, IntStream.range(0, prompts.size())
                    .mapToObj(i -> Map.<String, Object>of("id", i, "prompt", prompts.get(i))).toList());
            List<JsonNode> answers = kafka.readCommitted(out, r -> KafkaTopics.distinctIds(r) > prompts.size(), TIMEOUT);
            double seconds = (System.nanoTime() - t0) / 1e9;
            Map<Integer, Integer> tokens = new HashMap<>();
            answers.forEach(a -> tokens.put(a.get("id").asInt(), a.get("completion_tokens").asInt()));
            tokens.remove(-1);
            assertThat(tokens).hasSize(prompts.size());
            return new Run("ML_PREDICT (SQL)", run, tokens.values().stream().mapToLong(Integer::longValue).sum(),
                    seconds);
        } finally {
            job.cancel().get();
        }
    }

    private static String table(List<Run> runs) {
        StringBuilder s = new StringBuilder(String.format(Locale.ROOT, "%d prompts, max %d tokens, greedy, device %s%n%n",
                ROWS, MAX_TOKENS, DEVICE));
        s.append("| side | run | tokens | seconds | tokens/s |\n|---|---|---|---|---|\n");
        for (Run r : runs) {
            s.append(String.format(Locale.ROOT, "| %s | %d | %d | %.2f | %.1f |%n", r.side(), r.run(), r.tokens(),
                    r.seconds(), r.tokensPerSecond()));
        }
        double sql = median(runs, "ML_PREDICT");
        double ds = median(runs, "DataStream");
        s.append(String.format(Locale.ROOT, "%nmedian tokens/s: ML_PREDICT %.1f, DataStream job %.1f, ratio %.2f%n",
                sql, ds, sql / ds));
        return s.toString();
    }

    private static double median(List<Run> runs, String side) {
        double[] v = runs.stream().filter(r -> r.side().startsWith(side)).mapToDouble(Run::tokensPerSecond).sorted()
                .toArray();
        return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
    }
}
