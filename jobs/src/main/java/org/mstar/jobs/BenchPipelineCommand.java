package org.mstar.jobs;

import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code mstar bench-pipeline}: the flags; {@link PipelineBench} runs it (see {@link ServeCommand} for why). */
@Command(name = "bench-pipeline", mixinStandardHelpOptions = true,
        description = "Serve the same requests through the bare engine and through the Flink job (Kafka, RocksDB"
                + " checkpoints, the generate operator) in this process, and compare tokens/s, TTFT and inter-token"
                + " latency; optionally inject task failures and check the outputs against an uninterrupted run.")
final class BenchPipelineCommand implements Callable<Integer> {
    @Mixin
    BenchModelFlags modelFlags;

    @Option(names = "--batches", paramLabel = "N", split = ",",
            description = "One load per size: N requests sent at once. Default: 1,16,64.")
    List<Integer> batches = List.of(1, 16, 64);

    @Option(names = "--prompt-len", paramLabel = "N", description = "Prompt tokens of the batch loads. Default: ${DEFAULT-VALUE}.")
    int promptLen = 512;

    @Option(names = "--max-tokens", paramLabel = "N",
            description = "Generated tokens per request of the batch loads (EOS ignored). Default: ${DEFAULT-VALUE}.")
    int maxTokens = 128;

    @Option(names = "--mixed", paramLabel = "N",
            description = "Requests of the mixed load: prompts of prompt-len/8 to 2 x prompt-len tokens, outputs of"
                    + " max-tokens/8 to 2 x max-tokens; 0 skips it. Default: ${DEFAULT-VALUE}.")
    int mixed = 256;

    @Mixin
    EngineSizeFlags sizing = EngineSizeFlags.fixed(64, 2048, 8192);

    @Option(names = "--checkpoint-interval", paramLabel = "MILLIS",
            description = "RocksDB checkpoints of the measured job. Default: ${DEFAULT-VALUE}.")
    long checkpointMillis = 1000;

    @Option(names = "--buffer-timeout", paramLabel = "MILLIS",
            description = "Flink's execution.buffer-timeout.interval. Default: ${DEFAULT-VALUE}.")
    long bufferTimeoutMillis = 5;

    @Option(names = "--batch-invariant",
            description = "Batch-invariant numerics on the GPU (mstar.engine.batch-invariant), for the engine and the job.")
    boolean batchInvariant;

    @Option(names = "--failures", paramLabel = "N",
            description = "After the table: run a failover load twice under EXACTLY_ONCE, uninterrupted and with N"
                    + " injected task failures, and compare the committed outputs. With --disaggregation: serve the"
                    + " mixed load once more through the disaggregated job with N failures injected in the prefill"
                    + " operator and N in the decode operator. Default: ${DEFAULT-VALUE}.")
    int failures = 0;

    @Option(names = "--failover-requests", paramLabel = "N",
            description = "Requests of the failover load (mixed lengths, half greedy, half seeded sampling)."
                    + " Default: ${DEFAULT-VALUE}.")
    int failoverRequests = 64;

    @Option(names = "--disaggregation",
            description = "Instead of the engine-vs-job table: serve one mixed load (decoders with short prompts and"
                    + " long outputs, long prompts arriving while they decode) through the colocated job and through"
                    + " the disaggregated one (prefill and decode operators, each with its own engine and KV pool on"
                    + " --device), and compare tokens/s, TTFT, inter-token latency and the hand-offs.")
    boolean disaggregation;

    @Option(names = "--devices", paramLabel = "D1,D2", split = ",",
            description = "With --disaggregation: two devices (e.g. cuda:0,cuda:1). Adds the colocated job at"
                    + " parallelism 2 (one engine on each), and runs the disaggregated job's prefill on D1 and its"
                    + " decode on D2. Default: everything on --device.")
    List<String> devices;

    @Option(names = "--decoders", paramLabel = "N",
            description = "With --disaggregation: requests sent at the start; with the long prompts running beside"
                    + " them they should fit --max-batch-rows, or long prompts wait for rows instead of interfering."
                    + " Default: ${DEFAULT-VALUE}.")
    int decoders = 56;

    @Option(names = "--decoder-prompt-len", paramLabel = "N", description = "Default: ${DEFAULT-VALUE}.")
    int decoderPromptLen = 128;

    @Option(names = "--decoder-max-tokens", paramLabel = "N", description = "Default: ${DEFAULT-VALUE}.")
    int decoderMaxTokens = 512;

    @Option(names = "--long-prompts", paramLabel = "N",
            description = "With --disaggregation: long-prompt requests sent while the decoders run."
                    + " Default: ${DEFAULT-VALUE}.")
    int longPrompts = 8;

    @Option(names = "--long-prompt-lens", paramLabel = "N", split = ",",
            description = "Prompt tokens of the long prompts, taken in turn. Default: 4096,8192,12288.")
    List<Integer> longPromptLens = List.of(4096, 8192, 12288);

    @Option(names = "--long-max-tokens", paramLabel = "N", description = "Default: ${DEFAULT-VALUE}.")
    int longMaxTokens = 32;

    @Option(names = "--long-start", paramLabel = "MILLIS",
            description = "When the first long prompt is sent, after the decoders. Default: ${DEFAULT-VALUE}.")
    long longStartMillis = 2000;

    @Option(names = "--long-interval", paramLabel = "MILLIS",
            description = "Between two long prompts. Default: ${DEFAULT-VALUE}.")
    long longIntervalMillis = 1000;

    @Option(names = "--prefill-pages", paramLabel = "N",
            description = "KV pages of the prefill engine (disaggregated). Default: --pages.")
    Integer prefillPages;

    @Option(names = "--decode-pages", paramLabel = "N",
            description = "KV pages of the decode engine (disaggregated). Default: --pages.")
    Integer decodePages;

    @Option(names = "--prefill-token-budget", paramLabel = "N",
            description = "Token budget of the prefill engine (disaggregated). Default: --token-budget.")
    Integer prefillTokenBudget;

    @Option(names = "--same-device-handoff",
            description = "With --disaggregation, hand off by handle within the TaskManager"
                    + " (mstar.disaggregation.same-device-handoff): the prefill engine lends its KV pages, the records"
                    + " carry a ticket, the decode engine copies the pages device to device (its own or, with two"
                    + " devices, from the prefill one's).")
    boolean sameDeviceHandoff;

    @Option(names = "--handoff-record-size", paramLabel = "SIZE",
            description = "Most KV bytes in one hand-off record. Default: ${DEFAULT-VALUE}.")
    String handoffRecordSize = "1mb";

    @Option(names = "--timeout", paramLabel = "SECONDS", description = "Per load. Default: ${DEFAULT-VALUE}.")
    long timeoutSeconds = 300;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        return PipelineBench.run(this, spec.commandLine());
    }
}
