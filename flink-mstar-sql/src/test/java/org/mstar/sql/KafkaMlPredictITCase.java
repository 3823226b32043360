package org.mstar.sql;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.jobs.EmbeddedKafkaBroker;

/**
 * A SQL job from a Kafka table of prompts through {@code ML_PREDICT} to a Kafka table of answers written exactly
 * once, with a failure injected while rows are in the engine and then a stop with a savepoint that a new job resumes:
 * a read_committed consumer sees every prompt's answer once, with the text the prompt gets alone from a bare engine.
 * And the README's SQL example, statement by statement.
 */
class KafkaMlPredictITCase {
    private static final Duration TIMEOUT = Duration.ofSeconds(120);
    private static final int ROWS = 24;
    private static final java.util.regex.Pattern SET = java.util.regex.Pattern.compile("SET '([^']+)' = '([^']*)'");

    @RegisterExtension
    static final MiniClusterExtension FLINK = new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
            .setNumberTaskManagers(1).setNumberSlotsPerTaskManager(2).build());

    private static EmbeddedKafkaBroker broker;
    private static KafkaTopics kafka;

    @BeforeAll
    static void startBroker() throws Exception {
        broker = EmbeddedKafkaBroker.start();
        kafka = new KafkaTopics(broker.bootstrapServers());
    }

    @AfterAll
    static void stopBroker() throws Exception {
        broker.close();
    }

    @Test
    void aFailureAndASavepointWhileRowsAreInTheEngineLoseAndRepeatNoAnswer(@TempDir Path savepoints)
            throws Exception {
        kafka.create("failover-prompts", "failover-answers");
        List<String> prompts = TinyModel.prompts(ROWS);
        Map<String, String> options = TinyModel.options();
        FailOnce.ARMED.set(false);
        FailOnce.FIRED.set(false);

        JobClient job = startFailoverJob(options, null);
        try {
            kafka.produce("failover-prompts", records(prompts, 0, ROWS / 3));
            // committed output means a checkpoint completed: the failure then rolls back to a real checkpoint
            assertThat(kafka.readCommitted("failover-answers", r -> !r.isEmpty(), TIMEOUT)).isNotEmpty();
            FailOnce.ARMED.set(true);
            kafka.produce("failover-prompts", records(prompts, ROWS / 3, 2 * ROWS / 3));
            kafka.readCommitted("failover-answers", r -> KafkaTopics.distinctIds(r) >= ROWS / 2, TIMEOUT);
            kafka.produce("failover-prompts", records(prompts, 2 * ROWS / 3, ROWS));
        } catch (Exception | AssertionError e) {
            job.cancel().get();
            throw e;
        }
        String savepoint = job.stopWithSavepoint(false, savepoints.toUri().toString(), SavepointFormatType.CANONICAL)
                .get();
        long answeredBeforeSavepoint =
                KafkaTopics.distinctIds(kafka.readCommitted("failover-answers", r -> false, Duration.ofSeconds(1)));
        JobClient resumed = startFailoverJob(options, savepoint);
        try {
            kafka.readCommitted("failover-answers", r -> KafkaTopics.distinctIds(r) >= ROWS, TIMEOUT);
        } finally {
            resumed.cancel().get();
        }

        List<JsonNode> answers = kafka.readCommitted("failover-answers", r -> false, Duration.ofSeconds(2));
        assertThat(FailOnce.FIRED).isTrue();
        assertThat(answeredBeforeSavepoint).as("rows left for the job restored from the savepoint").isLessThan(ROWS);
        Map<Integer, List<String>> byId = new HashMap<>();
        for (JsonNode a : answers) {
            byId.computeIfAbsent(a.get("id").asInt(), k -> new ArrayList<>()).add(a.get("text").asText());
        }
        assertThat(byId.keySet()).containsExactlyInAnyOrderElementsOf(IntStream.range(0, ROWS).boxed().toList());
        Map<String, String> alone = TinyModel.reference(options, prompts);
        byId.forEach((id, texts) -> assertThat(texts).as("answers of row " + id)
                .containsExactly(alone.get(prompts.get(id))));
    }

    /** The failover test's job: Kafka in, ML_PREDICT, FAIL_ONCE on the text, Kafka out exactly once. */
    private static JobClient startFailoverJob(Map<String, String> options, String savepoint) {
        TableEnvironment env = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
        env.getConfig().set("parallelism.default", "1");
        env.getConfig().set("execution.checkpointing.interval", "300 ms");
        env.getConfig().set("restart-strategy.type", "fixed-delay");
        env.getConfig().set("restart-strategy.fixed-delay.attempts", "3");
        env.getConfig().set("restart-strategy.fixed-delay.delay", "200 ms");
        if (savepoint != null) {
            env.getConfig().set("execution.state-recovery.path", savepoint);
        }
        env.createTemporarySystemFunction("FAIL_ONCE", FailOnce.class);
        env.executeSql("CREATE TABLE prompts (id INT, prompt STRING) WITH ('connector' = 'kafka', 'topic' = 'failover-prompts',"
                + " 'properties.bootstrap.servers' = '" + broker.bootstrapServers() + "',"
                + " 'properties.group.id' = 'ml-predict', 'scan.startup.mode' = 'earliest-offset', 'format' = 'json')");
        env.executeSql("CREATE TABLE answers (id INT, text STRING, finish_reason STRING) WITH ('connector' = 'kafka',"
                + " 'topic' = 'failover-answers', 'properties.bootstrap.servers' = '" + broker.bootstrapServers() + "',"
                + " 'format' = 'json', 'sink.delivery-guarantee' = 'exactly-once',"
                + " 'sink.transactional-id-prefix' = 'ml-predict', 'properties.transaction.timeout.ms' = '120000')");
        env.executeSql("CREATE TEMPORARY MODEL m INPUT (prompt STRING) OUTPUT (text STRING, finish_reason STRING)"
                + " WITH (" + TinyModel.with(options) + ")");
        return env.executeSql("INSERT INTO answers SELECT id, FAIL_ONCE(text), finish_reason FROM ML_PREDICT("
                + "TABLE prompts, MODEL m, DESCRIPTOR(prompt), MAP['max-concurrent-operations', '8'])")
                .getJobClient().orElseThrow();
    }

    @Test
    void theReadmeSqlExampleAnswersEveryPrompt() throws Exception {
        TableEnvironment env = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
        JobClient job = null;
        for (String statement : readmeSql()) {
            if (statement.startsWith("SELECT")) {
                continue; // the SQL client's view of the answers; read here as a consumer below
            }
            java.util.regex.Matcher set = SET.matcher(statement);
            if (set.matches()) { // a SQL client command, not a statement of the table API
                env.getConfig().set(set.group(1), set.group(2));
                continue;
            }
            TableResult result = env.executeSql(statement.replace("localhost:9092", broker.bootstrapServers()));
            job = statement.startsWith("INSERT INTO answers") ? result.getJobClient().orElseThrow() : job;
        }
        assertThat(job).as("the README's ML_PREDICT job").isNotNull();
        try {
            List<JsonNode> answers = kafka.readCommitted("answers", r -> r.size() >= 3, TIMEOUT);
            assertThat(answers).extracting(a -> a.get("id").asInt()).containsExactlyInAnyOrder(1, 2, 3);
            assertThat(answers).allSatisfy(a -> assertThat(a.get("finish_reason").asText()).isIn("stop", "length"));
        } finally {
            job.cancel().get();
        }
    }

    /** The statements of the README's SQL example, comments left out. */
    private static List<String> readmeSql() throws Exception {
        String readme = Files.readString(Path.of("..", "README.md"));
        int section = readme.indexOf("## Flink SQL");
        int start = readme.indexOf("```sql\n", section) + "```sql\n".length();
        String sql = readme.substring(start, readme.indexOf("```", start)).lines()
                .filter(line -> !line.startsWith("--")).collect(Collectors.joining("\n"));
        return Arrays.stream(sql.split(";")).map(String::strip).filter(s -> !s.isEmpty()).toList();
    }

    private static List<Map<String, Object>> records(List<String> prompts, int from, int to) {
        return IntStream.range(from, to).mapToObj(i -> Map.<String, Object>of("id", i, "prompt", prompts.get(i)))
                .toList();
    }
}
