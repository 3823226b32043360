package org.mstar.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.ModelDescriptor;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.Table;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.ValidationException;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.flink.types.ColumnList;
import org.apache.flink.types.Row;
import org.apache.flink.util.CloseableIterator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.model.ModelConfig;
import org.mstar.model.lora.RandomPeftAdapters;

/**
 * {@code CREATE MODEL ... WITH ('provider' = 'mstar')} and {@code ML_PREDICT} through Flink's SQL planner on a
 * MiniCluster, with the bundled tiny random Llama on the CPU: every row's text equals the text its prompt gets alone
 * from a bare engine, input the model cannot take becomes an error row (or fails the job), and bad options are
 * refused by name.
 */
class MlPredictITCase {
    @RegisterExtension
    static final MiniClusterExtension FLINK = new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
            .setNumberTaskManagers(1).setNumberSlotsPerTaskManager(2).build());

    private static final List<String> PROMPTS = TinyModel.prompts(12);

    private static TableEnvironment sql(Configuration config) {
        TableEnvironment env = TableEnvironment.create(EnvironmentSettings.newInstance().inStreamingMode()
                .withConfiguration(config).build());
        env.getConfig().set("parallelism.default", "1");
        return env;
    }

    private static void promptsView(TableEnvironment env, List<String> prompts) {
        String values = java.util.stream.IntStream.range(0, prompts.size())
                .mapToObj(i -> "(" + i + ", '" + prompts.get(i) + "')").collect(Collectors.joining(", "));
        env.executeSql("CREATE TEMPORARY VIEW prompts AS SELECT * FROM (VALUES " + values + ") AS t(id, prompt)");
    }

    private static List<Row> collect(TableEnvironment env, String query) throws Exception {
        List<Row> rows = new ArrayList<>();
        try (CloseableIterator<Row> it = env.executeSql(query).collect()) {
            it.forEachRemaining(rows::add);
        }
        return rows;
    }

    @Test
    void everyRowGetsTheTextItsPromptGetsAloneInInputOrder() throws Exception {
        Map<String, String> options = TinyModel.options();
        TableEnvironment env = sql(new Configuration());
        promptsView(env, PROMPTS);
        env.executeSql("CREATE TEMPORARY MODEL m INPUT (prompt STRING) OUTPUT (text STRING, tokens ARRAY<INT>,"
                + " finish_reason STRING, completion_tokens INT) WITH (" + TinyModel.with(options) + ")");

        List<Row> rows = collect(env, "SELECT id, text, tokens, finish_reason, completion_tokens FROM ML_PREDICT("
                + "TABLE prompts, MODEL m, DESCRIPTOR(prompt), MAP['max-concurrent-operations', '12'])");

        Map<String, String> alone = TinyModel.reference(options, PROMPTS);
        assertThat(rows).extracting(r -> r.getField(0)).containsExactlyElementsOf(
                java.util.stream.IntStream.range(0, PROMPTS.size()).boxed().toList());
        for (Row r : rows) {
            String prompt = PROMPTS.get((Integer) r.getField(0));
            assertThat(r.getField(1)).as(prompt).isEqualTo(alone.get(prompt));
            Integer[] tokens = (Integer[]) r.getField(2);
            assertThat(tokens).hasSizeBetween(1, TinyModel.MAX_TOKENS);
            assertThat(r.getField(4)).isEqualTo(tokens.length);
            assertThat(r.getField(3)).isEqualTo(tokens.length == TinyModel.MAX_TOKENS ? "length" : "stop");
        }
    }

    @Test
    void unorderedOutputGivesEveryRowItsTextAndSynchronousPredictionIsRefused() throws Exception {
        Map<String, String> options = TinyModel.options();
        TableEnvironment env = sql(new Configuration());
        promptsView(env, PROMPTS);
        env.executeSql("CREATE TEMPORARY MODEL m INPUT (prompt STRING) OUTPUT (text STRING) WITH ("
                + TinyModel.with(options) + ")");
        String query = "SELECT prompt, text FROM ML_PREDICT(TABLE prompts, MODEL m, DESCRIPTOR(prompt), MAP[%s])";
        Map<String, String> alone = TinyModel.reference(options, PROMPTS);
        assertThat(collect(env, query.formatted("'output-mode', 'allow_unordered'")))
                .extracting(r -> Row.of(r.getField(0), r.getField(1)))
                .containsExactlyInAnyOrderElementsOf(PROMPTS.stream().map(p -> Row.of(p, alone.get(p))).toList());
        assertThatThrownBy(() -> collect(env, query.formatted("'async', 'false'")))
                .satisfies(e -> assertThat(messages(e)).contains("doesn't support sync mode"));
    }

    @Test
    void theReadmeTableApiExampleRuns() throws Exception {
        TableEnvironment env = sql(new Configuration());
        env.createTemporaryModel("llm", ModelDescriptor.forProvider("mstar")
                .inputSchema(Schema.newBuilder().column("prompt", DataTypes.STRING()).build())
                .outputSchema(Schema.newBuilder().column("text", DataTypes.STRING())
                        .column("finish_reason", DataTypes.STRING()).build())
                .option("model.random", "tiny").option("device", "cpu").option("max-tokens", "32")
                .build());
        Table prompts = env.fromValues(DataTypes.ROW(DataTypes.FIELD("id", DataTypes.INT()),
                DataTypes.FIELD("prompt", DataTypes.STRING())), Row.of(1, "The capital of France is"), Row.of(2, "Flink is"));
        List<Row> rows = new ArrayList<>();
        try (CloseableIterator<Row> it = env.fromModel("llm")
                .predict(prompts, ColumnList.of("prompt"), Map.of("max-concurrent-operations", "64")).execute().collect()) {
            it.forEachRemaining(rows::add);
        }
        assertThat(rows).extracting(r -> r.getField("id")).containsExactly(1, 2);
        assertThat(rows).allSatisfy(r -> assertThat(r.getField("finish_reason")).isIn("stop", "length"));
    }

    @Test
    void inputTheModelCannotTakeBecomesAnErrorRow() throws Exception {
        TableEnvironment env = sql(new Configuration());
        env.executeSql("CREATE TEMPORARY VIEW chats AS SELECT * FROM (VALUES"
                + " (0, CAST(NULL AS STRING), CAST(NULL AS ARRAY<ROW<role STRING, content STRING>>)),"
                + " (1, 'Hello', CAST(NULL AS ARRAY<ROW<role STRING, content STRING>>)),"
                + " (2, CAST(NULL AS STRING), ARRAY[ROW('user', 'Hi')]),"
                + " (3, '" + "word ".repeat(40) + "', CAST(NULL AS ARRAY<ROW<role STRING, content STRING>>))"
                + ") AS t(id, prompt, messages)");
        env.executeSql("CREATE TEMPORARY MODEL m INPUT (prompt STRING, messages ARRAY<ROW<role STRING, content"
                + " STRING>>) OUTPUT (text STRING, finish_reason STRING, error STRING) WITH ("
                + TinyModel.with(TinyModel.options("kv.max-seq-len", "32")) + ")");

        Map<Integer, Row> rows = collect(env, "SELECT id, text, finish_reason, error FROM ML_PREDICT("
                + "TABLE chats, MODEL m, DESCRIPTOR(prompt, messages))").stream()
                .collect(Collectors.toMap(r -> (Integer) r.getField(0), r -> r));

        assertThat(rows).hasSize(4);
        assertThat(rows.get(1).getField(2)).isIn("stop", "length");
        assertThat(rows.get(1).getField(3)).isNull();
        assertThat(rows.get(0).getField(3)).asString().startsWith("400: prompt").contains("exactly one");
        // the tiny model has no chat template
        assertThat(rows.get(2).getField(3)).asString().startsWith("400: messages").contains("chat template");
        assertThat(rows.get(3).getField(3)).asString().startsWith("400:");
        for (int id : List.of(0, 2, 3)) {
            assertThat(rows.get(id).getField(1)).isNull();
            assertThat(rows.get(id).getField(2)).isEqualTo("error");
        }
    }

    @Test
    void theAdapterColumnRunsEachRowWithItsAdapter(@TempDir Path tmp) throws Exception {
        Path adapters = tmp.resolve("adapters");
        RandomPeftAdapters.write(adapters, ModelConfig.load(RandomModels.folder(RandomModels.TINY)),
                new RandomPeftAdapters.Spec("support", 8, 16, false, List.of("q_proj", "v_proj", "down_proj")), 5);
        TableEnvironment env = sql(new Configuration());
        env.executeSql("CREATE TEMPORARY VIEW asks AS SELECT * FROM (VALUES (0, '" + PROMPTS.get(0) + "',"
                + " CAST(NULL AS STRING)), (1, '" + PROMPTS.get(0) + "', 'support'), (2, '" + PROMPTS.get(0) + "',"
                + " 'legal')) AS t(id, prompt, adapter)");
        Map<String, String> options = TinyModel.options("temperature", "0");
        env.executeSql("CREATE TEMPORARY MODEL m INPUT (prompt STRING, adapter STRING) OUTPUT (text STRING,"
                + " error STRING) WITH (" + TinyModel.with(TinyModel.options("temperature", "0", "engine.adapters-dir",
                        adapters.toString())) + ")");

        Map<Integer, Row> rows = collect(env, "SELECT id, text, error FROM ML_PREDICT(TABLE asks, MODEL m,"
                + " DESCRIPTOR(prompt, adapter))").stream().collect(Collectors.toMap(r -> (Integer) r.getField(0),
                        r -> r));

        assertThat(rows).hasSize(3);
        assertThat(rows.get(0).getField(1)).as("no adapter: the base model")
                .isEqualTo(TinyModel.reference(options, List.of(PROMPTS.get(0))).get(PROMPTS.get(0)));
        assertThat(rows.get(1).getField(2)).isNull();
        assertThat(rows.get(1).getField(1)).isNotEqualTo(rows.get(0).getField(1));
        assertThat(rows.get(2).getField(1)).isNull();
        assertThat(rows.get(2).getField(2)).asString()
                .startsWith("400: adapter: unknown adapter 'legal'; this engine serves support");
    }

    @Test
    void structuredOutputConstrainsEveryRow() throws Exception {
        TableEnvironment env = sql(new Configuration());
        promptsView(env, PROMPTS);
        env.executeSql("CREATE TEMPORARY MODEL m INPUT (prompt STRING) OUTPUT (text STRING, finish_reason STRING)"
                + " WITH (" + TinyModel.with(TinyModel.options("regex", "(yes|no|maybe)", "max-tokens", "8")) + ")");
        List<Row> rows = collect(env, "SELECT text, finish_reason FROM ML_PREDICT(TABLE prompts, MODEL m,"
                + " DESCRIPTOR(prompt))");
        assertThat(rows).hasSize(PROMPTS.size()).allSatisfy(r -> {
            assertThat(r.getField(0)).isIn("yes", "no", "maybe");
            assertThat(r.getField(1)).isEqualTo("stop");
        });
    }

    @Test
    void aModelFolderWithAChatTemplateTakesConversationsAndTemplatedPrompts(@TempDir Path tmp) throws Exception {
        Path folder = tmp.resolve("model");
        Files.createDirectories(folder);
        try (var files = Files.list(RandomModels.folder(RandomModels.TINY))) {
            for (Path f : files.toList()) {
                Files.copy(f, folder.resolve(f.getFileName()));
            }
        }
        Files.writeString(folder.resolve("chat_template.jinja"), "{% for m in messages %}<{{ m.role }}>{{ m.content }}"
                + "</{{ m.role }}>{% endfor %}<assistant>");
        TableEnvironment env = sql(new Configuration());
        env.executeSql("CREATE TEMPORARY VIEW chats AS SELECT * FROM (VALUES"
                + " (0, 'Hi', CAST(NULL AS ARRAY<ROW<role STRING, content STRING>>)),"
                + " (1, CAST(NULL AS STRING), ARRAY[ROW('user', 'Hi')])) AS t(id, prompt, messages)");
        Map<String, String> options = TinyModel.options("chat-template", "true");
        options.remove("model.random");
        options.put("model.dir", folder.toString());
        env.executeSql("CREATE TEMPORARY MODEL m INPUT (prompt STRING, messages ARRAY<ROW<role STRING, content"
                + " STRING>>) OUTPUT (text STRING, prompt_tokens INT, error STRING) WITH (" + TinyModel.with(options)
                + ")");
        List<Row> rows = collect(env, "SELECT id, text, prompt_tokens, error FROM ML_PREDICT(TABLE chats, MODEL m,"
                + " DESCRIPTOR(prompt, messages))");
        assertThat(rows).hasSize(2).allSatisfy(r -> assertThat(r.getField(3)).isNull());
        // the prompt went through the template as one user turn: the same tokens and text as the conversation
        assertThat(rows.get(0).getField(2)).isEqualTo(rows.get(1).getField(2));
        assertThat((Integer) rows.get(0).getField(2)).isGreaterThan(2 + "<user>Hi</user><assistant>".length() / 4);
    }

    @Test
    void withOnErrorFailBadInputFailsTheJobNamingTheReason() {
        TableEnvironment env = sql(new Configuration());
        env.executeSql("CREATE TEMPORARY MODEL m INPUT (prompt STRING) OUTPUT (text STRING) WITH ("
                + TinyModel.with(TinyModel.options("on-error", "fail")) + ")");
        promptsView(env, List.of(""));
        assertThatThrownBy(() -> collect(env, "SELECT text FROM ML_PREDICT(TABLE prompts, MODEL m, DESCRIPTOR(prompt))"))
                .rootCause().hasMessageContaining("prompt: must not be empty");
    }

    @Test
    void aModelFolderMissingOnTheTaskManagerFailsTheJobOnceNamingIt(@TempDir Path tmp) {
        TableEnvironment env = sql(new Configuration());
        env.getConfig().set("restart-strategy.type", "fixed-delay");
        env.getConfig().set("restart-strategy.fixed-delay.attempts", "1000");
        promptsView(env, List.of("Hi"));
        Map<String, String> options = TinyModel.options();
        options.remove("model.random");
        options.put("model.dir", tmp.resolve("gone").toString());
        env.executeSql("CREATE TEMPORARY MODEL m INPUT (prompt STRING) OUTPUT (text STRING) WITH ("
                + TinyModel.with(options) + ")");
        // without the suppressed restarts this would retry a thousand times
        assertThatThrownBy(() -> collect(env, "SELECT text FROM ML_PREDICT(TABLE prompts, MODEL m, DESCRIPTOR(prompt))"))
                .satisfies(e -> assertThat(messages(e)).contains("'model.dir' = '" + tmp.resolve("gone")
                        + "': no config.json"));
    }

    @Test
    void badOptionsAreRefusedByNameWhenAQueryUsesTheModel() {
        TableEnvironment env = sql(new Configuration());
        promptsView(env, PROMPTS);
        assertRefused(env, "(prompt STRING)", "(text STRING)", TinyModel.options("max-tokenz", "3"), "max-tokenz");
        assertRefused(env, "(prompt STRING)", "(text STRING)", TinyModel.options("max-tokens", "0"), "'max-tokens'");
        assertRefused(env, "(prompt STRING)", "(text STRING)", TinyModel.options("temperature", "-1"), "'temperature'");
        assertRefused(env, "(prompt STRING)", "(text STRING)", TinyModel.options("device", "gpu0"), "'device'");
        assertRefused(env, "(prompt STRING)", "(text STRING)", TinyModel.options("regex", "[a-"), "'regex'");
        assertRefused(env, "(prompt STRING)", "(text STRING)", TinyModel.options("engine.max-batch-rows", "x"),
                "engine.max-batch-rows");
        assertRefused(env, "(prompt STRING)", "(text STRING)", TinyModel.options("model.dir", "/models/x"),
                "'model.dir'");
        assertRefused(env, "(prompt STRING)", "(text STRING)", TinyModel.options("model.random", "huge"),
                "'model.random'");
        assertRefused(env, "(prompt STRING)", "(summary STRING)", TinyModel.options(), "'summary'");
        assertRefused(env, "(prompt STRING)", "(text STRING)", TinyModel.options("engine.factory", "java.lang.String"),
                "'engine.factory'");
        assertRefused(env, "(prompt STRING)", "(text STRING)",
                TinyModel.options("engine.gpu-memory-fraction", "1.5"), "'engine.gpu-memory-fraction'");
    }

    private static void assertRefused(TableEnvironment env, String input, String output, Map<String, String> options,
                                      String named) {
        env.executeSql("DROP TEMPORARY MODEL IF EXISTS bad");
        env.executeSql("CREATE TEMPORARY MODEL bad INPUT " + input + " OUTPUT " + output + " WITH ("
                + TinyModel.with(options) + ")");
        assertThatThrownBy(() -> env.sqlQuery("SELECT * FROM ML_PREDICT(TABLE prompts, MODEL bad, DESCRIPTOR(prompt))"))
                .isInstanceOf(ValidationException.class)
                .satisfies(e -> assertThat(messages(e)).contains(named));
    }

    @Test
    void withTheCatalogListenerBadOptionsFailCreateModelItself() {
        Configuration config = new Configuration();
        config.setString("table.catalog-modification.listeners", "mstar");
        TableEnvironment env = sql(config);
        assertThatThrownBy(() -> env.executeSql("CREATE TEMPORARY MODEL bad INPUT (prompt STRING) OUTPUT (text STRING)"
                + " WITH (" + TinyModel.with(TinyModel.options("top-p", "1.5")) + ")"))
                .satisfies(e -> assertThat(messages(e)).contains("'top-p'"));
        assertThatThrownBy(() -> env.executeSql("CREATE TEMPORARY MODEL bad INPUT (prompt INT) OUTPUT (text STRING)"
                + " WITH (" + TinyModel.with(TinyModel.options()) + ")"))
                .satisfies(e -> assertThat(messages(e)).contains("'prompt' must be STRING"));
        assertThat(env.listTemporaryModels()).doesNotContain("bad");
        env.executeSql("CREATE TEMPORARY MODEL good INPUT (prompt STRING) OUTPUT (text STRING) WITH ("
                + TinyModel.with(TinyModel.options()) + ")");
        assertThat(env.listTemporaryModels()).contains("good");
    }

    /** The messages of {@code e} and its causes, one a line. */
    private static String messages(Throwable e) {
        StringBuilder s = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            s.append(t.getMessage()).append('\n');
        }
        return s.toString();
    }
}
