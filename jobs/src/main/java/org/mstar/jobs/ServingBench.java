package org.mstar.jobs;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.util.FileUtils;
import org.mstar.engine.AdapterOptions;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.EngineSizer;
import org.mstar.engine.EngineSizing;
import org.mstar.engine.GenerationEngine;
import org.mstar.flink.DeviceTurn;
import org.mstar.model.ModelConfig;
import org.mstar.resources.KVCacheDType;
import picocli.CommandLine;

/**
 * Runs {@code mstar bench-serving}: the device's rates first, then every row through the bare engine (sized as
 * {@code serve} sizes it, unless flags set the sizes), through the Flink job and, where flink-mstar-sql is on the
 * class path, through {@code ML_PREDICT} ({@link BenchServingSide}), over one copy of the weights. Each side warms up
 * on a few short requests before its rows.
 */
final class ServingBench {
    private static final int PAGE_SIZE = 16;
    /** Prompt tokens of the warm-up's requests. */
    private static final int WARM_UP_TOKENS = 32;

    private ServingBench() {}

    /** One row to serve: a load and how it arrives. */
    private record Row(ServingLoad load, String mode, double rate, int concurrency) {}

    static int run(BenchServingCommand flags, CommandLine cli) throws Exception {
        PrintWriter out = cli.getOut();
        PrintWriter err = cli.getErr();
        if (flags.sides.isEmpty() || !List.of("engine", "flink", "sql").containsAll(flags.sides)) {
            throw new CommandLine.ParameterException(cli, "--sides takes any of engine, flink and sql, not "
                    + flags.sides);
        }
        if (flags.plot != null) {
            return plotOnly(flags.plot, err);
        }
        BenchServingSide sql = flags.sides.contains("sql") ? BenchServingSide.find("sql").orElseThrow(() ->
                new CommandLine.ParameterException(cli, "--sides sql needs flink-mstar-sql and Flink's table planner on"
                        + " the class path, as the pipeline bundle has them (docs/guides/gpu-pipeline.md)")) : null;
        DeliveryGuarantee delivery = delivery(flags, cli);
        int adapters = adapters(flags, cli);
        Path work = Files.createTempDirectory("mstar-bench-serving-");
        try {
            BenchModelFlags.Resolved resolved = flags.modelFlags.resolve(work);
            Path modelDir = resolved.dir();
            Long seed = resolved.randomSeed();
            ModelConfig config = ModelConfig.load(modelDir);
            List<Row> rows = rows(flags, cli);
            if (sql != null) {
                checkSqlRows(rows, cli);
            }
            int longest = rows.stream().mapToInt(r -> r.load().longestSequence()).max().orElse(1);
            // room for the warm-up's requests too
            int maxSeqLen = Math.min(config.maxPositionEmbeddings(),
                    Math.max(2 * WARM_UP_TOKENS, (longest + PAGE_SIZE) / PAGE_SIZE * PAGE_SIZE));
            if (longest > config.maxPositionEmbeddings()) {
                throw new CommandLine.ParameterException(cli, "a request of " + longest + " tokens exceeds the model's"
                        + " context of " + config.maxPositionEmbeddings());
            }
            EngineSizing.Request sizing = EngineSizing.Request.of(flags.sizing.maxBatchRows, flags.sizing.tokenBudget,
                    flags.sizing.pages, flags.gpuMemoryFraction);

            long t = System.nanoTime();
            BenchModels.Loaded shared = BenchModels.get(modelDir, seed, flags.modelFlags.device);
            DeviceTurn turn = shared.turn();
            EngineOptions cpuDefaults = EngineOptions.cpuDefaults(maxSeqLen);
            EngineOptions defaults = cpuDefaults.withKvCache(cpuDefaults.kvCache().toBuilder()
                            .cacheDType(KVCacheDType.parse(flags.kvCacheDType)).build())
                    .withDecodeGraphs(turn.device().isCuda())
                    .withAdapters(adapters == 0 ? null : new AdapterOptions(ModelSource.randomAdapters(modelDir,
                            adapters), adapters));
            // the warm-up loads every adapter, so that no row times a load
            ServingLoad warmUp = ServingLoad.fixed(Math.max(4, adapters), WARM_UP_TOKENS, 8);
            err.printf(Locale.ROOT, "%s on %s: weights %s in %.1f s%n", seed == null ? modelDir : "random weights",
                    turn.device().name(), seed == null ? "loaded" : "made", (System.nanoTime() - t) / 1e9);
            DeviceRates rates = turn.call(() -> DeviceRates.measure(turn.device()));
            err.printf(Locale.ROOT, "measured on %s: copy bandwidth %.0f GB/s, matmul %.1f GFLOP/s%n",
                    turn.device().name(), rates.bytesPerSecond() / 1e9, rates.flopsPerSecond() / 1e9);
            err.flush();

            Map<String, Object> report = new LinkedHashMap<>();
            report.put("date", Instant.now().toString());
            // the parse result is the whole command line's, the subcommand included
            report.put("command", "mstar " + String.join(" ", cli.getParseResult().originalArgs()));
            report.put("device", turn.device().name());
            report.put("model", flags.modelFlags.describe());
            report.put("adapters", adapters);
            report.put("kvCacheDType", flags.kvCacheDType);
            report.put("copyBandwidthBytesPerSecond", rates.bytesPerSecond());
            report.put("matmulFlopsPerSecond", rates.flopsPerSecond());
            List<ServingResult> results = new ArrayList<>();
            ServingResult.Slo slo = new ServingResult.Slo(flags.sloTtftMs, flags.sloTpotMs);
            if (flags.sides.contains("engine")) {
                EngineSizer.Sized sized = turn.call(() -> EngineSizer.build(modelDir, shared.weights(), defaults,
                        sizing));
                report.put("engineSizing", sized.sizing());
                err.println("engine: " + describe(sized.sizing()));
                GenerationEngine engine = turn.guard(sized.engine());
                try {
                    EngineLoadRunner.run(engine, warmUp, 0, config.vocabSize(), adapters, flags.timeoutSeconds,
                            new ServingProgress(err, "warm-up"));
                    ServingCeiling ceiling = ceiling(config, sized.sizing(), rates);
                    List<Map<String, Object>> profiles = new ArrayList<>();
                    for (Row row : rows) {
                        ServingProgress progress = new ServingProgress(err, "engine " + label(row));
                        HostProfile before = HostProfile.start(sized.engine());
                        ServingTrace trace = EngineLoadRunner.run(engine, row.load(), row.concurrency(),
                                config.vocabSize(), adapters, flags.timeoutSeconds, progress);
                        results.add(result(row, "engine", trace, slo, ceiling, out));
                        Map<String, Object> profile = before.end(sized.engine(), trace.seconds());
                        profiles.add(Map.of("row", label(row), "profile", profile));
                        err.println("  host profile of engine " + label(row) + ": " + profile);
                    }
                    report.put("engineHostProfiles", profiles);
                } finally {
                    engine.close();
                    turn.run(() -> turn.device().releaseCachedMemory());
                }
            }
            if (flags.sides.contains("flink")) {
                try (EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start();
                     JobLoadRunner job = JobLoadRunner.start(broker, new BenchEngineFactory(modelDir, seed, defaults,
                             sizing), delivery, flags.checkpointMillis, flags.modelFlags.device, flags.jobOptions,
                             work, adapters)) {
                    job.run(warmUp, 0, config.vocabSize(), flags.timeoutSeconds, new ServingProgress(err, "warm-up"));
                    EngineSizing jobSizing = BenchEngineFactory.lastSizing();
                    report.put("jobSizing", jobSizing);
                    report.put("delivery", delivery.name());
                    report.put("checkpointIntervalMillis", flags.checkpointMillis);
                    report.put("jobOptions", flags.jobOptions);
                    err.println("flink job (" + delivery + "): " + describe(jobSizing));
                    ServingCeiling ceiling = ceiling(config, jobSizing, rates);
                    List<Map<String, Object>> profiles = new ArrayList<>();
                    for (Row row : rows) {
                        ServingProgress progress = new ServingProgress(err, "flink " + label(row));
                        JobLoadRunner.ProfiledRun run = job.runProfiled(row.load(), row.concurrency(),
                                config.vocabSize(), flags.timeoutSeconds, progress);
                        results.add(result(row, "flink", run.trace(), slo, ceiling, out));
                        profiles.add(Map.of("row", label(row), "profile", run.profile()));
                        err.print("  job profile of flink " + label(row) + ":\n" + run.profile().text("    ",
                                run.tasks()));
                        err.flush();
                    }
                    report.put("jobProfiles", profiles);
                }
            }
            if (sql != null) {
                // the DataStream job's engine is closed: its cached memory goes back, so that the SQL job's engine is
                // sized from the free memory the DataStream job's was
                turn.run(() -> turn.device().releaseCachedMemory());
                try (EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start()) {
                    BenchServingSide.Setup setup = new BenchServingSide.Setup(broker.bootstrapServers(),
                            PipelineBench.jobConfig("sql", flags.checkpointMillis, 5, 0, flags.modelFlags.device, work),
                            delivery, modelDir, flags.modelFlags.device, SharedWeightsEngineFactory.class.getName(),
                            maxSeqLen, sizing, Duration.ofSeconds(flags.timeoutSeconds), work);
                    report.put("delivery", delivery.name());
                    report.put("checkpointIntervalMillis", flags.checkpointMillis);
                    for (Row row : rows) {
                        err.println("sql " + label(row) + ": a fresh ML_PREDICT job");
                        err.flush();
                        AnswerRecorder answers = new AnswerRecorder(row.load());
                        sql.serveOffline(setup, row.load().requests().stream().map(r -> new BenchServingSide.Request(
                                r.promptLen(), r.outputLen())).toList(), answers);
                        EngineSizing sqlSizing = BenchEngineFactory.lastSizing();
                        report.put("sqlSizing", sqlSizing);
                        err.println("sql job (" + delivery + "): " + describe(sqlSizing));
                        results.add(result(row, "sql", answers.trace(), slo, ceiling(config, sqlSizing, rates), out));
                    }
                }
            }
            out.println();
            out.print(table(results, report));
            out.flush();
            report.put("rows", results);
            Files.createDirectories(flags.results);
            new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT)
                    .writeValue(flags.results.resolve("results.json").toFile(), report);
            err.println("wrote " + flags.results.resolve("results.json"));
            drawPlots(results, flags.results, "mstar on " + turn.device().name(), err);
            return 0;
        } finally {
            FileUtils.deleteDirectory(work.toFile());
        }
    }

    /**
     * The random adapters of {@code --adapters} (0 without it); refused with a model folder (random weights only) and
     * with the sql side, whose table has no adapter column in this bench.
     */
    private static int adapters(BenchServingCommand flags, CommandLine cli) {
        if (flags.adapters == null) {
            return 0;
        }
        if (flags.adapters < 1 || flags.modelFlags.model != null || flags.sides.contains("sql")) {
            throw new CommandLine.ParameterException(cli, "--adapters N takes N >= 1, with random weights (not"
                    + " --model) and the engine and flink sides, got " + flags.adapters);
        }
        return flags.adapters;
    }

    /** Redraws the plots of a results.json beside it. */
    private static int plotOnly(Path resultsJson, PrintWriter err) throws Exception {
        ObjectMapper json = new ObjectMapper();
        JsonNode report = json.readTree(resultsJson.toFile());
        List<ServingResult> rows = new ArrayList<>();
        for (JsonNode row : report.path("rows")) {
            rows.add(json.treeToValue(row, ServingResult.class));
        }
        Path dir = resultsJson.toAbsolutePath().getParent();
        drawPlots(rows, dir, "mstar on " + report.path("device").asText(), err);
        return 0;
    }

    /** Plots need AWT's fonts; where a machine has none the results stand without pictures. */
    private static void drawPlots(List<ServingResult> rows, Path dir, String title, PrintWriter err) {
        try {
            for (Path png : ServingPlots.draw(rows, dir, title)) {
                err.println("wrote " + png);
            }
        } catch (Exception | Error e) {
            err.println("no plots drawn (" + e + "); draw them elsewhere with: mstar bench-serving --plot "
                    + dir.resolve("results.json"));
        }
        err.flush();
    }

    private static DeliveryGuarantee delivery(BenchServingCommand flags, CommandLine cli) {
        String d = flags.delivery.toUpperCase(Locale.ROOT);
        if (!List.of("EXACTLY_ONCE", "AT_LEAST_ONCE").contains(d)) {
            throw new CommandLine.ParameterException(cli, "--delivery is EXACTLY_ONCE or AT_LEAST_ONCE, not '"
                    + flags.delivery + "'.");
        }
        return DeliveryGuarantee.valueOf(d);
    }

    /** Offline rows (fixed lengths, then the mix), then the online rows (rates, then concurrencies). */
    private static List<Row> rows(BenchServingCommand flags, CommandLine cli) throws Exception {
        List<Row> rows = new ArrayList<>();
        for (String lengths : flags.offline) {
            if (!lengths.equalsIgnoreCase("none")) {
                rows.add(new Row(fixed(lengths, flags.numPrompts, cli), "offline", 0, 0));
            }
        }
        int mixPrompts = flags.mixPrompts == null ? flags.numPrompts : flags.mixPrompts;
        if (flags.mix.equals("chat")) {
            rows.add(new Row(ServingLoad.chatMix(mixPrompts, flags.seed), "offline", 0, 0));
        } else if (!flags.mix.equalsIgnoreCase("none")) {
            Path file = Path.of(flags.mix);
            if (!Files.isRegularFile(file)) {
                throw new CommandLine.ParameterException(cli, "--mix is chat, none or a JSON-lines file; " + file
                        + " is not a file");
            }
            try {
                rows.add(new Row(ServingLoad.jsonl(file), "offline", 0, 0));
            } catch (IllegalArgumentException e) {
                throw new CommandLine.ParameterException(cli, e.getMessage());
            }
        }
        if (flags.rounds < 1) {
            throw new CommandLine.ParameterException(cli, "--rounds must be at least 1, not " + flags.rounds);
        }
        int most = Math.max(flags.onlinePrompts, flags.rounds * flags.concurrency.stream().mapToInt(c -> c).max()
                .orElse(0));
        ServingLoad online = flags.onlineLoad.equals("chat") ? ServingLoad.chatMix(most, flags.seed)
                : fixed(flags.onlineLoad, most, cli);
        for (double rate : flags.rates) {
            if (!(rate > 0)) {
                throw new CommandLine.ParameterException(cli, "--rates must be positive, not " + rate);
            }
            rows.add(new Row(online.first(flags.onlinePrompts).poisson(rate, flags.seed), "rate", rate, 0));
        }
        for (int c : flags.concurrency) {
            if (c < 1) {
                throw new CommandLine.ParameterException(cli, "--concurrency must be at least 1, not " + c);
            }
            rows.add(new Row(online.first(c * flags.rounds), "concurrency", 0, c));
        }
        if (rows.isEmpty()) {
            throw new CommandLine.ParameterException(cli, "nothing to run: every offline and online row is off");
        }
        return rows;
    }

    /** ML_PREDICT's max-tokens is the model's, and each row gets its own job and model: one output length a row. */
    private static void checkSqlRows(List<Row> rows, CommandLine cli) {
        for (Row row : rows) {
            if (!row.mode().equals("offline")
                    || row.load().requests().stream().mapToInt(ServingLoad.Request::outputLen).distinct().count() > 1) {
                throw new CommandLine.ParameterException(cli, "the sql side serves offline rows of one output length"
                        + " each; " + label(row) + " is not one (use --mix none and no --rates or --concurrency)");
            }
        }
    }

    /** {@code IN/OUT}, or {@code IN/OUT:N} for a row of N requests instead of {@code n}. */
    private static ServingLoad fixed(String lengths, int n, CommandLine cli) {
        String[] parts = lengths.split("[/:]");
        try {
            if (parts.length == 3) {
                n = Integer.parseInt(parts[2].strip());
                parts = new String[] {parts[0], parts[1]};
            }
            if (parts.length == 2 && n > 0) {
                int in = Integer.parseInt(parts[0].strip());
                int o = Integer.parseInt(parts[1].strip());
                if (in > 0 && o > 0) {
                    return ServingLoad.fixed(n, in, o);
                }
            }
        } catch (NumberFormatException e) {
            // refused below
        }
        throw new CommandLine.ParameterException(cli, "lengths are IN/OUT[:N], positive integers (e.g. 1000/1000 or"
                + " 1000/1000:500 for 500 requests), and a row needs at least one request: '" + lengths + "'");
    }

    /** A table of {@code side}'s output tokens/s over {@code base}'s, for each row both served. */
    private static void ratios(StringBuilder b, List<ServingResult> results, String side, String base, String title) {
        Map<String, ServingResult> baseRows = new LinkedHashMap<>();
        results.stream().filter(r -> r.side().equals(base)).forEach(r -> baseRows.put(rowName(r), r));
        List<ServingResult> sideRows = results.stream().filter(r -> r.side().equals(side)
                && baseRows.containsKey(rowName(r))).toList();
        if (sideRows.isEmpty()) {
            return;
        }
        b.append("\n| row | ").append(title).append(" |\n|---|---:|\n");
        for (ServingResult r : sideRows) {
            b.append(String.format(Locale.ROOT, "| %s | %.3f |%n", rowName(r),
                    r.outputTokS() / baseRows.get(rowName(r)).outputTokS()));
        }
    }

    private static String rowName(ServingResult r) {
        return r.load() + " " + switch (r.mode()) {
            case "rate" -> r.rate() + " req/s";
            case "concurrency" -> "concurrency " + r.concurrency();
            default -> r.mode();
        };
    }

    private static ServingCeiling ceiling(ModelConfig config, EngineSizing sizing, DeviceRates rates) {
        // page 0 is reserved
        return new ServingCeiling(config, sizing.maxBatchRows(), sizing.tokenBudget(),
                (long) (sizing.pages() - 1) * PAGE_SIZE, PAGE_SIZE, rates.bytesPerSecond(), rates.flopsPerSecond());
    }

    private static ServingResult result(Row row, String side, ServingTrace trace, ServingResult.Slo slo,
            ServingCeiling ceiling, PrintWriter out) {
        double c = row.mode().equals("offline") ? ceiling.outputTokensPerSecond(row.load()) : 0;
        ServingResult r = ServingResult.of(row.load(), side, row.mode(), row.rate(), row.concurrency(), trace, slo, c);
        out.print(r.row());
        out.flush();
        return r;
    }

    private static String label(Row row) {
        return row.load().name() + " " + switch (row.mode()) {
            case "rate" -> row.rate() + " req/s";
            case "concurrency" -> "concurrency " + row.concurrency();
            default -> "offline";
        };
    }

    private static String describe(EngineSizing s) {
        return String.format(Locale.ROOT, "%d rows, %d tokens a step, %d KV pages of %d tokens (%s)", s.maxBatchRows(),
                s.tokenBudget(), s.pages(), PAGE_SIZE, s.reason());
    }

    /** The rows, then each row's throughput of the job over the engine's, and of ML_PREDICT over the job's. */
    static String table(List<ServingResult> results, Map<String, Object> report) {
        StringBuilder b = new StringBuilder(ServingResult.HEADER);
        results.forEach(r -> b.append(r.row()));
        ratios(b, results, "flink", "engine", "Flink / engine output tok/s");
        ratios(b, results, "sql", "flink", "SQL / Flink output tok/s");
        b.append(String.format(Locale.ROOT, "%ndevice %s, copy %.0f GB/s, matmul %.1f GFLOP/s, %s%n",
                report.get("device"), (double) report.get("copyBandwidthBytesPerSecond") / 1e9,
                (double) report.get("matmulFlopsPerSecond") / 1e9, report.get("date")));
        return b.toString();
    }
}
