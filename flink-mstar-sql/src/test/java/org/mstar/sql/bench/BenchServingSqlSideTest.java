package org.mstar.sql.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.jobs.Mstar;
import picocli.CommandLine;

/**
 * {@code mstar bench-serving --sides flink,sql} on the CPU with the bundled tiny model, as the pipeline bundle runs
 * it: the sql side is found on the class path, serves the row through ML_PREDICT with the DataStream job's engine
 * sizing, and the table compares the two.
 */
class BenchServingSqlSideTest {
    private final StringWriter out = new StringWriter();
    private final StringWriter err = new StringWriter();

    @Test
    void servesAnOfflineRowThroughMlPredictBesideTheDataStreamJob(@TempDir Path results) throws Exception {
        int code = run("bench-serving", "--sides", "flink,sql", "--offline", "24/6:5", "--mix", "none",
                "--checkpoint-interval", "200", "--results", results.toString(), "--timeout", "120");

        assertThat(code).as("exit code; stderr:%n%s", err).isZero();
        assertThat(out.toString()).contains("| 24/6 | flink | offline | 5 |", "| 24/6 | sql | offline | 5 |",
                "| row | SQL / Flink output tok/s |", "| 24/6 offline | ");
        // ML_PREDICT answers arrive whole: TTFT is the time to the answer, and there is no TPOT or ITL
        assertThat(out.toString().lines().filter(l -> l.startsWith("| 24/6 | sql |")).findFirst().orElseThrow())
                .contains("| - | - |");
        JsonNode json = new ObjectMapper().readTree(results.resolve("results.json").toFile());
        // EOS ignored: every request generated its 6 tokens on both sides; the prompts were 24 tokens (checked per row)
        assertThat(json.get("rows").findValues("outputTokens").stream().map(JsonNode::asLong).toList())
                .containsExactly(30L, 30L);
        assertThat(json.get("rows").findValues("side").stream().map(JsonNode::asText).toList())
                .containsExactly("flink", "sql");
        assertThat(json.get("sqlSizing")).isEqualTo(json.get("jobSizing"));
        assertThat(json.get("rows").get(1).get("outputTokS").asDouble()).isPositive();
    }

    @Test
    void refusesRowsMlPredictCannotServe() {
        assertThat(run("bench-serving", "--sides", "sql", "--offline", "none", "--mix", "chat")).isEqualTo(2);
        assertThat(err.toString()).contains("the sql side serves offline rows of one output length");
        err.getBuffer().setLength(0);
        assertThat(run("bench-serving", "--sides", "flink,sql", "--offline", "16/4", "--mix", "none",
                "--rates", "2")).isEqualTo(2);
        assertThat(err.toString()).contains("the sql side serves offline rows of one output length");
    }

    private int run(String... args) {
        CommandLine cli = Mstar.commandLine();
        cli.setOut(new PrintWriter(out, true));
        cli.setErr(new PrintWriter(err, true));
        return cli.execute(args);
    }
}
