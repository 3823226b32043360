package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.junit.jupiter.api.Test;
import org.mstar.flink.DisaggregationOptions;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.KafkaIoOptions;
import org.mstar.flink.LlamaEngineOptions;
import picocli.CommandLine;

class MstarCliTest {
    private final StringWriter out = new StringWriter();
    private final StringWriter err = new StringWriter();

    @Test
    void helpListsTheCommands() {
        assertThat(run("--help")).isZero();
        assertThat(out.toString()).contains("kafka", "serve", "send", "demo", "bench-delivery", "bench-pipeline");
    }

    @Test
    void serveWithoutAModelSaysSoAndPrintsTheUsage() {
        assertThat(run("serve")).isEqualTo(2);
        assertThat(err.toString()).startsWith("serve needs a model: --model DIR").contains("Usage: mstar serve")
                .doesNotContain("Exception");
    }

    @Test
    void badOptionsPrintTheUsageNotAStackTrace() {
        assertThat(run("serve", "--no-such-flag", "--random")).isEqualTo(2);
        assertThat(err.toString()).contains("Unknown option: '--no-such-flag'", "Usage: mstar serve");
        err.getBuffer().setLength(0);
        assertThat(run("serve", "--parallelism", "two", "--random")).isEqualTo(2);
        assertThat(err.toString()).contains("'two' is not an int", "Usage: mstar serve");
        err.getBuffer().setLength(0);
        assertThat(run("serve", "--random", "--delivery", "twice")).isEqualTo(2);
        assertThat(err.toString()).contains("--delivery is EXACTLY_ONCE or AT_LEAST_ONCE, not 'twice'");
        assertThat(err.toString()).doesNotContain("Exception", "\tat ");
    }

    @Test
    void aModelFolderThatIsNoneIsNamedByItsFlag(@org.junit.jupiter.api.io.TempDir java.nio.file.Path empty) {
        assertThat(run("generate", "--model", empty.toString(), "--prompt", "hi")).isEqualTo(2);
        assertThat(err.toString()).contains("--model " + empty + ": no config.json in it").doesNotContain("Exception");
        err.getBuffer().setLength(0);
        assertThat(run("serve", "--model", empty.resolve("missing").toString())).isEqualTo(2);
        assertThat(err.toString()).contains("--model " + empty.resolve("missing") + ": no such folder",
                "Usage: mstar serve");
        err.getBuffer().setLength(0);
        assertThat(run("serve", "--random", empty.resolve("none.json").toString())).isEqualTo(2);
        assertThat(err.toString()).contains("--random " + empty.resolve("none.json") + ": no such file");
    }

    @Test
    void sendTakesPromptsOrAudioAndAudioThatFitsInOneRecord(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        java.nio.file.Path wav = java.nio.file.Files.write(dir.resolve("a.wav"), new byte[64]);
        assertThat(run("send", "--audio", wav.toString(), "hello")).isEqualTo(2);
        assertThat(err.toString()).contains("Give prompts or audio (--audio, --audio-path), not both.",
                "Usage: mstar send");
        err.getBuffer().setLength(0);
        java.nio.file.Path big = java.nio.file.Files.write(dir.resolve("big.wav"), new byte[1_000_001]);
        assertThat(run("send", "--audio", big.toString())).isEqualTo(2);
        assertThat(err.toString()).contains("--audio " + big + ": 1000001 bytes, more than the 1000000",
                "--audio-path instead").doesNotContain("Exception");
        err.getBuffer().setLength(0);
        assertThat(run("send", "--audio", dir.resolve("none.wav").toString())).isEqualTo(2);
        assertThat(err.toString()).contains("--audio " + dir.resolve("none.wav") + ": cannot read it");
    }

    @Test
    void serveTakesTheAudioFolderAsAnAbsolutePath() {
        CommandLine.ParseResult parsed = new CommandLine(new Mstar()).parseArgs("serve", "--random", "--audio-dir",
                "calls/../audio");
        Configuration conf = ServeJob.configuration((ServeCommand) parsed.subcommand().commandSpec().userObject());
        assertThat(conf.get(GenerateOptions.AUDIO_DIR))
                .isEqualTo(java.nio.file.Path.of("audio").toAbsolutePath().toString());
    }

    @Test
    void serveTakesTheAdaptersFolderAsAnAbsolutePath() {
        CommandLine.ParseResult parsed = new CommandLine(new Mstar()).parseArgs("serve", "--random", "--adapters",
                "fine-tunes/../adapters", "-Dmstar.engine.adapter-slots=128");
        Configuration conf = ServeJob.configuration((ServeCommand) parsed.subcommand().commandSpec().userObject());
        assertThat(conf.get(LlamaEngineOptions.ADAPTERS_DIR))
                .isEqualTo(java.nio.file.Path.of("adapters").toAbsolutePath().toString());
        assertThat(conf.get(LlamaEngineOptions.ADAPTER_SLOTS)).isEqualTo(128);
    }

    @Test
    void randomAdaptersGoWithRandomWeightsOnly() {
        assertThat(run("serve", "--model", "m", "--random-adapters", "2")).isEqualTo(2);
        assertThat(err.toString()).contains("--random-adapters goes with --random, and instead of --adapters.");
        assertThat(run("serve", "--random", "--adapters", "a", "--random-adapters", "2")).isEqualTo(2);
    }

    @Test
    void theBenchmarksShareTheirSizingFlagsWithTheirOwnDefaults() {
        BenchPipelineCommand pipeline = (BenchPipelineCommand) new CommandLine(new Mstar())
                .parseArgs("bench-pipeline", "--pages", "100").subcommand().commandSpec().userObject();
        assertThat(List.of(pipeline.sizing.maxBatchRows, pipeline.sizing.tokenBudget, pipeline.sizing.pages))
                .containsExactly(64, 2048, 100);
        BenchServingCommand serving = (BenchServingCommand) new CommandLine(new Mstar())
                .parseArgs("bench-serving", "--token-budget", "512").subcommand().commandSpec().userObject();
        // unset: sized as serve sizes each engine
        assertThat(Arrays.asList(serving.sizing.maxBatchRows, serving.sizing.tokenBudget, serving.sizing.pages))
                .containsExactly(null, 512, null);
        assertThat(run("bench-serving", "--help")).isZero();
        assertThat(out.toString()).contains("--max-batch-rows=N     Default: sized as serve sizes it.");
    }

    @Test
    void benchHandoffMovesEveryHandOffByRecordsAndByTicketInALocalJob() {
        assertThat(run("bench-handoff", "--prompt-lens", "4,8", "--kv-bytes-per-token", "3000", "--repeats", "2",
                "--interval", "0", "--record-size", "5000")).isZero();
        assertThat(out.toString()).containsPattern("\\| records \\| 4 \\| 0 \\| 2 \\|")
                .containsPattern("\\| records \\| 8 \\| 0 \\| 2 \\|")
                .containsPattern("\\| ticket \\| 4 \\| 0 \\| 2 \\|")
                .containsPattern("\\| ticket \\| 8 \\| 0 \\| 2 \\|");
    }

    @Test
    void benchHandoffTakesATransportInLowerCaseAndCountsThePulls() {
        assertThat(run("bench-handoff", "--transport", "ticket", "--prompt-lens", "4", "--kv-bytes-per-token", "3000",
                "--repeats", "3", "--interval", "0")).isZero();
        assertThat(out.toString()).doesNotContain("| records |").containsPattern("\\| ticket \\| 4 \\| 0 \\| 3 \\|");
        // the pulls of this process so far (other tests' included): these three at least
        Matcher pulls = Pattern.compile("pulls \\(brought / failed\\), (\\d+)/\\d+")
                .matcher(out.toString());
        assertThat(pulls.find()).isTrue();
        assertThat(Long.parseLong(pulls.group(1))).isGreaterThanOrEqualTo(3);
    }

    @Test
    void versionPrintsTheProjectVersion() {
        assertThat(run("-V")).isZero();
        assertThat(out.toString().trim()).matches("mstar \\d+\\.\\d+\\.\\d+.*");
    }

    @Test
    void errorEventsAreCountedSoSendCanFail() {
        ResponsePrinter printer = new ResponsePrinter(new java.io.PrintWriter(new java.io.StringWriter()),
                new java.io.PrintWriter(new java.io.StringWriter()), false);
        printer.accept(error("a", 400, "prompt: must not be empty"));
        printer.accept(error("b", 500, "model fault"));
        assertThat(printer.errors()).isEqualTo(2);
    }

    private static org.mstar.schemas.Response error(String id, int code, String message) {
        return org.mstar.schemas.Response.newBuilder()
                .setEvent(new org.mstar.schemas.ErrorEvent(id, code, message)).build();
    }

    @Test
    void topicDefaultsMatchThePipelineOptions() {
        KafkaTopics topics = new KafkaTopics();
        assertThat(topics.requestsTopic).isEqualTo(KafkaIoOptions.REQUESTS_TOPIC.defaultValue());
        assertThat(topics.responsesTopic).isEqualTo(KafkaIoOptions.RESPONSES_TOPIC.defaultValue());
    }

    @Test
    void serveTurnsFlagsIntoJobOptions() {
        CommandLine cli = new CommandLine(new Mstar());
        CommandLine.ParseResult parsed = cli.parseArgs("serve", "--bootstrap-servers", "k:9092",
                "--engine-factory", "x.Factory", "--model", "/models/m", "--delivery", "at_least_once",
                "-Dmstar.engine.max-waiting=7", "-Dexecution.checkpointing.interval=3 s");
        ServeCommand serve = (ServeCommand) parsed.subcommand().commandSpec().userObject();
        Configuration conf = ServeJob.configuration(serve);

        assertThat(conf.get(KafkaIoOptions.BOOTSTRAP_SERVERS)).isEqualTo("k:9092");
        assertThat(conf.get(KafkaIoOptions.DELIVERY_GUARANTEE)).isEqualTo(DeliveryGuarantee.AT_LEAST_ONCE);
        assertThat(conf.get(KafkaIoOptions.TRANSACTIONAL_ID_PREFIX)).isEqualTo("mstar-serve");
        assertThat(conf.get(GenerateOptions.ENGINE_FACTORY)).isEqualTo("x.Factory");
        assertThat(conf.get(GenerateOptions.MODEL_DIR)).isEqualTo("/models/m");
        assertThat(conf.get(GenerateOptions.MAX_WAITING)).isEqualTo(7);
        assertThat(conf.get(CheckpointingOptions.CHECKPOINTING_INTERVAL)).isEqualTo(Duration.ofSeconds(3));
        assertThat(conf.get(StateBackendOptions.STATE_BACKEND)).isEqualTo("rocksdb");
    }

    @Test
    void metricsPortSetsUpFlinksPrometheusReporterAndTheRunningLineNamesIt() {
        CommandLine.ParseResult parsed = new CommandLine(new Mstar()).parseArgs("serve", "--random", "--metrics-port",
                "9250");
        ServeCommand serve = (ServeCommand) parsed.subcommand().commandSpec().userObject();
        Configuration conf = ServeJob.configuration(serve);
        assertThat(conf.toMap()).containsEntry("metrics.reporter.prom.port", "9250").containsEntry(
                "metrics.reporter.prom.factory.class", "org.apache.flink.metrics.prometheus.PrometheusReporterFactory");
        assertThat(ServeJob.runningLine(serve, conf, "m", "r", true)).contains("Prometheus metrics at port 9250");
        assertThat(run("serve", "--random", "--metrics-port", "0")).isEqualTo(2);
        assertThat(err.toString()).contains("--metrics-port is a TCP port, 1-65535, not 0");
    }

    @Test
    void kafkaPropertiesFromTheFileBecomeJobOptionsAndDWins(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        java.nio.file.Path file = dir.resolve("client.properties");
        java.nio.file.Files.writeString(file, "security.protocol=SASL_SSL\nclient.id=from-file\n");
        CommandLine.ParseResult parsed = new CommandLine(new Mstar()).parseArgs("serve", "--kafka-properties",
                file.toString(), "-Dmstar.kafka.client.id=from-d");
        Configuration conf = ServeJob.configuration((ServeCommand) parsed.subcommand().commandSpec().userObject());
        assertThat(conf.toMap()).containsEntry("mstar.kafka.security.protocol", "SASL_SSL")
                .containsEntry("mstar.kafka.client.id", "from-d");

        assertThat(run("send", "--kafka-properties", dir.resolve("missing").toString(), "hi")).isEqualTo(2);
        assertThat(err.toString()).startsWith("mstar send: --kafka-properties " + dir.resolve("missing")
                + " cannot be read");
        assertThat(run("send", "-Dmstar.engine.max-waiting=3", "hi")).isEqualTo(2);
        assertThat(err.toString()).contains("send takes -D for Kafka client properties only");
    }

    @Test
    void serveDisaggregatedSetsEachSidesParallelismAndDevice() {
        CommandLine cli = new CommandLine(new Mstar());
        CommandLine.ParseResult parsed = cli.parseArgs("serve", "--bootstrap-servers", "k:9092", "--disaggregated",
                "--prefill-parallelism", "1", "--decode-parallelism", "3", "--prefill-device", "cuda:0",
                "--decode-device", "cuda:1");
        Configuration conf = ServeJob.configuration((ServeCommand) parsed.subcommand().commandSpec().userObject());

        assertThat(conf.get(DisaggregationOptions.ENABLED)).isTrue();
        assertThat(conf.get(DisaggregationOptions.PREFILL_PARALLELISM)).isEqualTo(1);
        assertThat(conf.get(DisaggregationOptions.DECODE_PARALLELISM)).isEqualTo(3);
        assertThat(conf.get(DisaggregationOptions.PREFILL_DEVICE)).isEqualTo("cuda:0");
        assertThat(conf.get(DisaggregationOptions.DECODE_DEVICE)).isEqualTo("cuda:1");
        Configuration plain = ServeJob.configuration((ServeCommand) new CommandLine(new Mstar())
                .parseArgs("serve", "--bootstrap-servers", "k:9092").subcommand().commandSpec().userObject());
        assertThat(plain.get(DisaggregationOptions.ENABLED)).isFalse();
    }

    @Test
    void demoServesARandomLlamaFromAnInProcessBrokerAndFlink() {
        int code = run("demo", "--max-tokens", "6", "--timeout", "120");

        assertThat(code).as("exit code; stderr:%n%s", err).isZero();
        assertThat(err.toString()).contains("random Llama", "Sending 3 prompts.");
        assertThat(err.toString().lines().filter(l -> l.contains("finish=")).count()).isEqualTo(3);
        assertThat(out.toString().lines().filter(l -> l.startsWith("[")).count()).isEqualTo(3);
    }

    @Test
    void framesStreamsEverySessionThroughTheJobWithMoreSessionsThanRings() {
        int code = run("frames", "--sessions", "3", "--frames", "2", "--resident", "2", "--timeout", "120");

        assertThat(code).as("exit code; stderr:%n%s", err).isZero();
        assertThat(err.toString()).contains("random frame model", "9 of 9 frames, 0 errors");
        for (String session : new String[] {"session-0", "session-1", "session-2"}) {
            assertThat(out.toString().lines().filter(l -> l.startsWith(session + " frame ")).count()).isEqualTo(3);
        }
    }

    @Test
    void benchPipelineComparesTheJobWithTheEngineAndSurvivesInjectedFailures() {
        int code = run("bench-pipeline", "--batches", "2", "--prompt-len", "16", "--max-tokens", "8", "--mixed", "4",
                "--failures", "2", "--failover-requests", "4", "--pages", "128", "--timeout", "120");

        assertThat(code).as("exit code; stderr:%n%s", err).isZero();
        assertThat(out.toString()).contains("| batch 2 | 2 | 16 |", "| 2 of 2 |", "| mixed 4 | 4 |", "| 4 of 4 |",
                "complete, each token committed once and in order: 4 of 4",
                "committed outputs identical to the uninterrupted run: 4 of 4",
                "a second uninterrupted run identical to the first: 4 of 4");
        assertThat(out.toString().lines().filter(l -> l.startsWith("  injected failure at colocated step")).count())
                .isEqualTo(2);
        assertThat(out.toString().lines().filter(l -> l.contains("weights reused from the cache")).count())
                .isGreaterThanOrEqualTo(2);
    }

    @Test
    void serveRunsOneGenerateSubtaskPerListedGpuUnlessToldOtherwise() {
        for (String[] c : new String[][] {{"cuda:0", "1"}, {"cuda:0,cuda:1", "2"}, {"cpu", null}, {"auto", null}}) {
            ServeCommand serve = (ServeCommand) new CommandLine(new Mstar()).parseArgs("serve", "--random", "--device",
                    c[0]).subcommand().commandSpec().userObject();
            assertThat(ServeJob.generateParallelism(serve, ServeJob.configuration(serve))).as(c[0])
                    .isEqualTo(c[1] == null ? null : Integer.valueOf(c[1]));
        }
        ServeCommand three = (ServeCommand) new CommandLine(new Mstar()).parseArgs("serve", "--random", "--device",
                "cuda:0", "--parallelism", "3").subcommand().commandSpec().userObject();
        Configuration conf = ServeJob.configuration(three);
        assertThat(ServeJob.generateParallelism(three, conf)).isEqualTo(3);
        // three engines on one GPU split its memory
        ServeJob.shareGpus(conf, 3);
        assertThat(conf.get(org.mstar.flink.LlamaEngineOptions.ENGINES_PER_DEVICE)).isEqualTo(3);
        Configuration cpu = new Configuration();
        ServeJob.shareGpus(cpu, 3);
        assertThat(cpu.getOptional(org.mstar.flink.LlamaEngineOptions.ENGINES_PER_DEVICE)).isEmpty();
    }

    @Test
    void benchServingMeasuresEveryRowOnBothSidesAndWritesResultsAndPlots(@org.junit.jupiter.api.io.TempDir
            java.nio.file.Path results) throws Exception {
        int code = run("bench-serving", "--offline", "24/6:4", "--mix", "none", "--rates", "40",
                "--concurrency", "1,3", "--rounds", "1", "--online-load", "12/4", "--online-prompts", "3", "--checkpoint-interval",
                "200", "--results", results.toString(), "--timeout", "120");

        assertThat(code).as("exit code; stderr:%n%s", err).isZero();
        String table = out.toString();
        for (String side : List.of("engine", "flink")) {
            assertThat(table).contains("| 24/6 | " + side + " | offline | 4 |", "| 12/4 | " + side + " | 40.00 req/s | 3 |",
                    "| 12/4 | " + side + " | concurrency 1 | 1 |", "| 12/4 | " + side + " | concurrency 3 | 3 |");
        }
        assertThat(table).contains("| row | Flink / engine output tok/s |");
        com.fasterxml.jackson.databind.JsonNode json = new com.fasterxml.jackson.databind.ObjectMapper()
                .readTree(results.resolve("results.json").toFile());
        assertThat(json.get("rows")).hasSize(8);
        // every request's tokens arrived on both sides, each counted once
        assertThat(json.get("rows").findValues("outputTokens").stream().map(n -> n.asLong()).toList())
                .containsExactly(24L, 12L, 4L, 12L, 24L, 12L, 4L, 12L);
        assertThat(json.get("rows").get(0).get("ceilingOutputTokS").asDouble()).isPositive();
        assertThat(json.get("engineSizing").get("pages").asInt()).isEqualTo(512);
        assertThat(json.get("delivery").asText()).isEqualTo("EXACTLY_ONCE");
        // each job row says where its time went: the offline row's 4 requests took steps, and its last token was read
        // after the checkpoint that committed it
        assertThat(json.get("jobProfiles")).hasSize(4);
        com.fasterxml.jackson.databind.JsonNode offline = json.get("jobProfiles").get(0).get("profile");
        assertThat(offline.get("steps").get("count").asLong()).isPositive();
        assertThat(offline.get("steps").get("engineMs").asDouble()).isPositive();
        assertThat(offline.get("arrivals").get("firstStepMs").asDouble())
                .isGreaterThanOrEqualTo(offline.get("arrivals").get("firstAtOperatorMs").asDouble());
        assertThat(offline.get("checkpoints").get("completed").asInt()).isPositive();
        assertThat(offline.get("checkpoints").get("tasks").fieldNames()).toIterable().anyMatch(t -> t.contains("generate"));
        assertThat(offline.get("commitWait").get("checkpointId").asLong()).isPositive();
        assertThat(offline.get("sinkTask").get("barrierWork").asLong()).isPositive();
        assertThat(err.toString()).contains("job profile of flink 24/6 offline:", "from the first step to the last token");
        assertThat(results.resolve("throughput-vs-concurrency.png")).isNotEmptyFile();
        assertThat(results.resolve("latency-vs-rate.png")).isNotEmptyFile();

        java.nio.file.Files.delete(results.resolve("latency-vs-rate.png"));
        assertThat(run("bench-serving", "--plot", results.resolve("results.json").toString())).isZero();
        assertThat(results.resolve("latency-vs-rate.png")).isNotEmptyFile();
    }

    @Test
    void benchServingSpreadsTheRequestsOverRandomAdapters(@org.junit.jupiter.api.io.TempDir java.nio.file.Path results)
            throws Exception {
        int code = run("bench-serving", "--offline", "24/6:5", "--mix", "none", "--adapters", "3", "--checkpoint-interval",
                "200", "--results", results.toString(), "--timeout", "120");

        assertThat(code).as("exit code; stderr:%n%s", err).isZero();
        com.fasterxml.jackson.databind.JsonNode json = new com.fasterxml.jackson.databind.ObjectMapper()
                .readTree(results.resolve("results.json").toFile());
        assertThat(json.get("adapters").asInt()).isEqualTo(3);
        // a request naming an adapter the engine does not serve fails, and fails the row: both sides served them all
        assertThat(json.get("rows").findValues("outputTokens").stream().map(n -> n.asLong()).toList())
                .containsExactly(30L, 30L);
        assertThat(ServingLoad.adapter(0, 3)).isEqualTo("random-1");
        assertThat(ServingLoad.adapter(4, 3)).isEqualTo("random-2");
        assertThat(ServingLoad.adapter(4, 0)).isNull();

        err.getBuffer().setLength(0);
        assertThat(run("bench-serving", "--adapters", "2", "--model", results.toString())).isEqualTo(2);
        assertThat(err.toString()).contains("--adapters N takes N >= 1, with random weights (not --model)")
                .doesNotContain("Exception");
    }

    @Test
    void benchServingRefusesBadLengthsInOneLine() {
        assertThat(run("bench-serving", "--offline", "100-100")).isEqualTo(2);
        assertThat(err.toString()).contains("lengths are IN/OUT[:N]", "'100-100'").doesNotContain("Exception");
        err.getBuffer().setLength(0);
        assertThat(run("bench-serving", "--mix", "no-such-file.jsonl", "--offline", "none")).isEqualTo(2);
        assertThat(err.toString()).contains("--mix is chat, none or a JSON-lines file");
    }

    @Test
    void benchPipelineComparesTheLayoutsOverTwoDevicesAndRecoversEachOperatorFromAFailure() {
        int code = run("bench-pipeline", "--disaggregation", "--devices", "cpu,cpu", "--failures", "1",
                "--decoders", "4", "--decoder-prompt-len", "8",
                "--decoder-max-tokens", "24", "--long-prompts", "2", "--long-prompt-lens", "96,160",
                "--long-max-tokens", "4", "--long-start", "20", "--long-interval", "20", "--pages", "128",
                "--decode-pages", "96", "--handoff-record-size", "16kb", "--checkpoint-interval", "100",
                "--timeout", "120");

        assertThat(code).as("exit code; stderr:%n%s", err).isZero();
        String table = out.toString();
        assertThat(table).contains("Disaggregation: 4 decoders", "devices cpu, cpu", "| colocated | 6 | 104 |",
                "| colocated x2 | 6 | 104 |", "| disaggregated | 6 | 104 |",
                "| disaggregated, 1 failures per operator | 6 | 104 |");
        // the CPU path is batch-invariant: every layout, and the run with failures, generates the same tokens
        assertThat(table.lines().filter(l -> l.startsWith("| ")).skip(1))
                .hasSize(4).allSatisfy(row -> assertThat(row).contains("| 6 of 6 |"));
        String disaggregated = table.lines().filter(l -> l.startsWith("| disaggregated |")).findFirst().orElseThrow();
        // every request is handed off once; the long prompts' KV spans several 16 KiB records
        assertThat(disaggregated).containsPattern("\\| 6 \\((\\d+) records\\) \\|");
        int records = Integer.parseInt(disaggregated.replaceAll(".*\\| 6 \\((\\d+) records\\).*", "$1"));
        assertThat(records).isGreaterThan(6);
        assertThat(table.lines().filter(l -> l.startsWith("| colocated |")).findFirst().orElseThrow())
                .contains("| - | - | - | - |");
        assertThat(table.lines().filter(l -> l.startsWith("  injected failure at prefill step"))).hasSize(1);
        assertThat(table.lines().filter(l -> l.startsWith("  injected failure at decode step"))).hasSize(1);
    }

    @Test
    void benchPipelineHandsOffByHandleOnOneDevice() {
        int code = run("bench-pipeline", "--disaggregation", "--devices", "cpu", "--same-device-handoff",
                "--decoders", "2", "--decoder-prompt-len", "8", "--decoder-max-tokens", "12", "--long-prompts", "1",
                "--long-prompt-lens", "160", "--long-max-tokens", "4", "--long-start", "20", "--pages", "128",
                "--decode-pages", "96", "--handoff-record-size", "16kb", "--checkpoint-interval", "100",
                "--timeout", "120");

        assertThat(code).as("exit code; stderr:%n%s", err).isZero();
        String table = out.toString();
        String byHandle = table.lines().filter(l -> l.startsWith("| disaggregated, by handle |")).findFirst()
                .orElseThrow(() -> new AssertionError("no by-handle row in:\n" + table));
        assertThat(byHandle).contains("| 3 | 28 |", "| 3 of 3 |");
        // a ticket instead of the KV: even the long prompt's hand-off takes one record
        assertThat(byHandle).contains("| 3 (3 records) |");
    }

    private int run(String... args) {
        CommandLine cli = Mstar.commandLine();
        cli.setOut(new PrintWriter(out, true));
        cli.setErr(new PrintWriter(err, true));
        return cli.execute(args);
    }
}
