package org.mstar.jobs;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code mstar bench-serving}: the flags; {@link ServingBench} runs it (see {@link ServeCommand} for why). */
@Command(name = "bench-serving", mixinStandardHelpOptions = true, resourceBundle = "org.mstar.jobs.BenchServingHelp",
        description = "Serving benchmark, as vLLM's benchmark_throughput and benchmark_serving measure an engine:"
                + " offline loads (every request at once: fixed lengths and a chat-like length mix) and online loads"
                + " (Poisson arrivals at given rates, or a fixed number in flight), through the bare engine and"
                + " through the Flink job (Kafka, RocksDB checkpoints, exactly-once sink) in this process. Prints"
                + " output and total tokens/s, TTFT, TPOT and ITL percentiles and goodput per row, each offline row"
                + " beside the ceiling this device allows for it; writes results.json and PNG plots.")
final class BenchServingCommand implements Callable<Integer> {
    @Mixin
    BenchModelFlags modelFlags;

    @Option(names = "--sides", paramLabel = "SIDE", split = ",",
            description = "Any of engine, flink and sql (ML_PREDICT through a Kafka JSON table, where flink-mstar-sql is on"
                    + " the class path; offline rows of one output length only). Default: engine,flink.")
    List<String> sides = List.of("engine", "flink");

    @Option(names = "--offline", paramLabel = "IN/OUT", split = ",",
            description = "Offline rows of fixed prompt/output lengths, each of --num-prompts requests or of N with"
                    + " IN/OUT:N; 'none' for none. Default: 128/128,1000/1000,2048/2048.")
    List<String> offline = List.of("128/128", "1000/1000", "2048/2048");

    @Option(names = "--num-prompts", paramLabel = "N", description = "Requests of each offline row. Default: ${DEFAULT-VALUE}.")
    int numPrompts = 1000;

    @Option(names = "--mix", paramLabel = "chat|FILE.jsonl|none",
            description = "An offline row of mixed lengths: 'chat' (a synthetic chat-like mix, docs/guides/serving-benchmarks.md),"
                    + " a JSON-lines file of {\"prompt_len\": N, \"output_len\": M}, or none. Default: ${DEFAULT-VALUE}.")
    String mix = "chat";

    @Option(names = "--mix-prompts", paramLabel = "N", description = "Requests of the chat mix. Default: --num-prompts.")
    Integer mixPrompts;

    @Option(names = "--rates", paramLabel = "R", split = ",",
            description = "Online rows: Poisson arrivals at these requests/s, of the --online-load requests.")
    List<Double> rates = List.of();

    @Option(names = "--concurrency", paramLabel = "C", split = ",",
            description = "Online rows: C requests kept in flight (a new one as one finishes), of the --online-load"
                    + " requests, C x --rounds of them.")
    List<Integer> concurrency = List.of();

    @Option(names = "--rounds", paramLabel = "N",
            description = "Requests of a --concurrency row: N for each request in flight. Default: ${DEFAULT-VALUE}.")
    int rounds = 4;

    @Option(names = "--plot", paramLabel = "RESULTS.json",
            description = "Only draw the plots of an earlier run's results.json, beside it.")
    Path plot;

    @Option(names = "--online-load", paramLabel = "IN/OUT|chat",
            description = "The requests of the online rows. Default: ${DEFAULT-VALUE}.")
    String onlineLoad = "1000/1000";

    @Option(names = "--online-prompts", paramLabel = "N", description = "Requests of each rate row. Default: ${DEFAULT-VALUE}.")
    int onlinePrompts = 200;

    @Option(names = "--slo-ttft-ms", paramLabel = "MS", description = "Goodput's TTFT bound. Default: ${DEFAULT-VALUE}.")
    double sloTtftMs = 1500;

    @Option(names = "--slo-tpot-ms", paramLabel = "MS", description = "Goodput's TPOT bound. Default: ${DEFAULT-VALUE}.")
    double sloTpotMs = 100;

    /** Unset: sized as serve sizes each engine (the help says so: BenchServingHelp.properties). */
    @Mixin
    EngineSizeFlags sizing;

    @Option(names = "--gpu-memory-fraction", paramLabel = "F", description = "Default: ${DEFAULT-VALUE}.")
    double gpuMemoryFraction = 0.9;

    @Option(names = "--checkpoint-interval", paramLabel = "MILLIS",
            description = "RocksDB checkpoints of the job; under exactly-once, tokens reach the client at each one."
                    + " Default: ${DEFAULT-VALUE}.")
    long checkpointMillis = 1000;

    @Option(names = "--delivery", paramLabel = "GUARANTEE",
            description = "The job's sink: EXACTLY_ONCE or AT_LEAST_ONCE. Default: ${DEFAULT-VALUE}.")
    String delivery = "EXACTLY_ONCE";

    @Option(names = "--kv-cache-dtype", paramLabel = "auto|fp8_e4m3",
            description = "What the engines' KV pages store: the model's dtype, or FP8 E4M3 codes (half the bytes a"
                    + " token; the sized pool holds twice the tokens). Default: ${DEFAULT-VALUE}.")
    String kvCacheDType = "auto";

    @Option(names = "-D", paramLabel = "KEY=VALUE",
            description = "A Flink or mstar.* option of the Flink job, over the bench's own, e.g."
                    + " -Dstate.changelog.enabled=false.")
    Map<String, String> jobOptions = new LinkedHashMap<>();

    @Option(names = "--adapters", paramLabel = "N",
            description = "Spread every row's requests round-robin over N random LoRA adapters (rank 8 on every"
                    + " projection, as serve --random-adapters writes them), all N held on the device; random weights"
                    + " only. Default: none, the base model.")
    Integer adapters;

    @Option(names = "--seed", paramLabel = "N", description = "Of the chat mix and the arrivals. Default: ${DEFAULT-VALUE}.")
    long seed = 7;

    @Option(names = "--results", paramLabel = "DIR",
            description = "Where results.json and the plots go. Default: ${DEFAULT-VALUE}.")
    Path results = Path.of("bench-serving-results");

    @Option(names = "--timeout", paramLabel = "SECONDS", description = "Per row. Default: ${DEFAULT-VALUE}.")
    long timeoutSeconds = 1800;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        return ServingBench.run(this, spec.commandLine());
    }
}
