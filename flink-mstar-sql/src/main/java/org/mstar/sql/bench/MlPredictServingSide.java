package org.mstar.sql.bench;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.apache.commons.lang3.exception.ExceptionUtils;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.mstar.flink.KafkaIoOptions;
import org.mstar.jobs.BenchServingSide;
import org.mstar.model.ModelConfig;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * The {@code sql} side of {@code mstar bench-serving}: each row through a fresh Flink SQL job, {@code ML_PREDICT} over a
 * Kafka JSON table of prompts into a Kafka table of answers ({@code CREATE MODEL ... WITH ('provider' = 'mstar')}),
 * with the DataStream side's job configuration, delivery guarantee and engines ({@code 'engine.factory'}: the same
 * weights, sized the same). Text prompts of each request's token length ({@link TokenLengthPrompts}), greedy, EOS
 * ignored. A request counts as answered when a {@code read_committed} consumer reads its row, and only after a
 * warm-up of the job that is not counted.
 */
public final class MlPredictServingSide implements BenchServingSide {
    private static final int WARM_UP_ROWS = 4;
    private static final int WARM_UP_TOKENS = 32;
    /** How often the job's status is checked while waiting for answers. */
    private static final Duration POLL = Duration.ofMillis(200);
    private static final AtomicInteger JOBS = new AtomicInteger();

    @Override
    public String name() {
        return "sql";
    }

    @Override
    public void serveOffline(Setup setup, List<Request> requests, Recorder recorder) throws Exception {
        Path model = TextModelFolder.of(setup.modelDir(), setup.work());
        List<Map<String, Object>> rows = new ArrayList<>();
        List<Map<String, Object>> warmUp = new ArrayList<>();
        try (TextTokenizer tokenizer = TextTokenizer.load(model)) {
            TokenLengthPrompts prompts = new TokenLengthPrompts(tokenizer, ModelConfig.load(model).vocabSize());
            for (int i = 0; i < requests.size(); i++) {
                rows.add(Map.of("id", i, "prompt", prompts.prompt(i, requests.get(i).promptLen())));
            }
            for (int i = 1; i <= WARM_UP_ROWS; i++) {
                warmUp.add(Map.of("id", -i, "prompt", prompts.prompt(-i, WARM_UP_TOKENS)));
            }
        }
        String job = "sql-" + JOBS.incrementAndGet();
        try (AnswerTopics topics = new AnswerTopics(setup.bootstrapServers(), job + "-prompts", job + "-answers")) {
            JobClient client = start(setup, model, job, requests.get(0).outputLen(), requests.size());
            CompletableFuture<JobExecutionResult> ended = client.getJobExecutionResult();
            try {
                await(ended, topics, Set.copyOf(warmUp.stream().map(r -> (Integer) r.get("id")).toList()),
                        setup.timeout(), AnswerTopics.json(warmUp), (answer, nanos) -> { });
                List<String> records = AnswerTopics.json(rows);
                Set<Integer> ids = new HashSet<>();
                for (int i = 0; i < requests.size(); i++) {
                    ids.add(i);
                }
                long sent = System.nanoTime();
                recorder.sent(sent);
                await(ended, topics, ids, setup.timeout(), records, (answer, nanos) -> {
                    int i = answer.get("id").asInt();
                    int promptTokens = answer.get("prompt_tokens").asInt();
                    if (promptTokens != requests.get(i).promptLen()) {
                        throw new IllegalStateException("request " + i + "'s prompt was " + promptTokens
                                + " tokens, not " + requests.get(i).promptLen());
                    }
                    recorder.answered(i, answer.get("completion_tokens").asInt(), nanos);
                });
            } finally {
                // a job that failed has taken its mini cluster down with it: nothing is left to cancel
                if (!ended.isDone()) {
                    client.cancel().get();
                }
            }
        }
    }

    private static JobClient start(Setup setup, Path model, String job, int maxTokens, int rows) {
        Configuration conf = new Configuration(setup.jobConfig());
        conf.setString("parallelism.default", "1");
        conf.setString("pipeline.name", "mstar bench-serving " + job);
        TableEnvironment env = TableEnvironment.create(EnvironmentSettings.newInstance().inStreamingMode()
                .withConfiguration(conf).build());
        String kafka = "'connector' = 'kafka', 'properties.bootstrap.servers' = '" + setup.bootstrapServers()
                + "', 'format' = 'json'";
        env.executeSql("CREATE TABLE prompts (id INT, prompt STRING) WITH (" + kafka + ", 'topic' = '" + job
                + "-prompts', 'properties.group.id' = '" + job + "', 'scan.startup.mode' = 'earliest-offset')");
        boolean exactlyOnce = setup.delivery() == DeliveryGuarantee.EXACTLY_ONCE;
        env.executeSql("CREATE TABLE answers (id INT, prompt_tokens INT, completion_tokens INT) WITH (" + kafka
                + ", 'topic' = '" + job + "-answers', 'sink.delivery-guarantee' = '"
                + (exactlyOnce ? "exactly-once', 'sink.transactional-id-prefix' = '" + job
                        // as the DataStream job's sink: Flink's 1 h default exceeds the broker's 15 min maximum
                        + "', 'properties.transaction.timeout.ms' = '"
                        + KafkaIoOptions.TRANSACTION_TIMEOUT.defaultValue().toMillis() : "at-least-once") + "')");
        env.executeSql("CREATE TEMPORARY MODEL m INPUT (prompt STRING) OUTPUT (prompt_tokens INT, completion_tokens INT)"
                + " WITH (" + with(modelOptions(setup, model, maxTokens)) + ")");
        // every row in flight at once, as the DataStream job admits every request; rows leave as they finish
        return env.executeSql("INSERT INTO answers SELECT id, prompt_tokens, completion_tokens FROM ML_PREDICT("
                + "TABLE prompts, MODEL m, DESCRIPTOR(prompt), MAP['max-concurrent-operations', '" + (rows + WARM_UP_ROWS)
                + "', 'timeout', '" + setup.timeout().toSeconds() + " s', 'output-mode', 'allow_unordered'])")
                .getJobClient().orElseThrow();
    }

    /** The model of the row: the DataStream side's engines, greedy, EOS ignored, {@code maxTokens} a row. */
    static Map<String, String> modelOptions(Setup setup, Path model, int maxTokens) {
        Map<String, String> o = new LinkedHashMap<>();
        o.put("provider", "mstar");
        o.put("model.dir", model.toString());
        o.put("device", setup.device());
        o.put("engine.factory", setup.engineFactory());
        o.put("max-tokens", Integer.toString(maxTokens));
        o.put("temperature", "0");
        o.put("ignore-eos", "true");
        o.put("kv.max-seq-len", Integer.toString(setup.maxSeqLen()));
        o.put("engine.gpu-memory-fraction", Double.toString(setup.sizing().memoryFraction()));
        setup.sizing().maxBatchRows().ifPresent(v -> o.put("engine.max-batch-rows", Integer.toString(v)));
        setup.sizing().tokenBudget().ifPresent(v -> o.put("engine.token-budget", Integer.toString(v)));
        setup.sizing().pages().ifPresent(v -> o.put("kv.pages", Integer.toString(v)));
        return o;
    }

    private static String with(Map<String, String> options) {
        return options.entrySet().stream().map(e -> "'" + e.getKey() + "' = '" + e.getValue().replace("'", "''") + "'")
                .collect(Collectors.joining(", "));
    }

    private static String failure(CompletableFuture<JobExecutionResult> ended) {
        try {
            ended.get();
            return "";
        } catch (Exception e) {
            return ": " + ExceptionUtils.getRootCause(e);
        }
    }

    /**
     * Sends {@code records} and reads answers until each of {@code ids} has one.
     *
     * @throws IllegalStateException when an id is answered twice, the job ends, or the time runs out
     */
    private static void await(CompletableFuture<JobExecutionResult> ended, AnswerTopics topics, Set<Integer> ids, Duration timeout,
            List<String> records, AnswerTopics.AnswerHandler handler) throws Exception {
        Set<Integer> waiting = new HashSet<>(ids);
        topics.send(records);
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!waiting.isEmpty()) {
            topics.poll(POLL, (answer, nanos) -> {
                int id = answer.get("id").asInt();
                if (ids.contains(id)) {
                    if (!waiting.remove(id)) {
                        throw new IllegalStateException("row " + id + " answered twice");
                    }
                    handler.accept(answer, nanos);
                }
            });
            if (!waiting.isEmpty() && (ended.isDone() || System.nanoTime() > deadline)) {
                throw new IllegalStateException("the ML_PREDICT job " + (ended.isDone() ? "ended" + failure(ended)
                        : "ran out of time (" + timeout.toSeconds() + " s)") + " with " + waiting.size() + " of "
                        + ids.size() + " rows unanswered");
            }
        }
    }
}
