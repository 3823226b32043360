package org.mstar.jobs;

import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code mstar bench-handoff}: the flags; {@link HandoffTransportBench} runs it. */
@Command(name = "bench-handoff", mixinStandardHelpOptions = true,
        description = "Move KV-sized hand-offs from a prefill-side to a decode-side task through Flink, as records"
                + " (today's path between TaskManagers) and by ticket over TCP (network hand-off), and print GB/s and"
                + " latency per prompt length. Submit it to a cluster whose TaskManagers have one slot each"
                + " (scripts/cluster/handoff-bench.sh) so the two sides run in different TaskManagers.")
final class BenchHandoffCommand implements Callable<Integer> {
    @Option(names = "--transport", split = ",", paramLabel = "KIND",
            description = "records, ticket, or both (in that order). Default: records,ticket.")
    List<HandoffTransportBench.Transport> transports =
            List.of(HandoffTransportBench.Transport.RECORDS, HandoffTransportBench.Transport.TICKET);

    @Option(names = "--prompt-lens", split = ",", paramLabel = "TOKENS",
            description = "Prompt lengths whose KV a hand-off carries. Default: 1024,4096,12288.")
    List<Integer> promptLens = List.of(1024, 4096, 12288);

    @Option(names = "--kv-bytes-per-token", paramLabel = "BYTES",
            description = "KV bytes a prompt token takes: Llama-3-8B in bf16 is 32 layers x 8 KV heads x 128 x 2 (K, V)"
                    + " x 2 bytes. Default: ${DEFAULT-VALUE}.")
    int kvBytesPerToken = 131072;

    @Option(names = "--repeats", paramLabel = "N", description = "Hand-offs per prompt length. Default: ${DEFAULT-VALUE}.")
    int repeats = 10;

    @Option(names = "--interval", paramLabel = "MILLIS",
            description = "Pause before each hand-off, so that they do not queue behind each other: a hand-off that"
                    + " arrives while the receiver still pulls the previous one waits, and the wait is in its latency"
                    + " (not in its pull). Default: ${DEFAULT-VALUE}.")
    long intervalMillis = 300;

    @Option(names = "--record-size", paramLabel = "BYTES",
            description = "Most KV bytes in one record (records transport). Default: ${DEFAULT-VALUE}.")
    int recordBytes = 1 << 20;

    @Option(names = "--host", description = "Address the prefill side's KV server listens on. Default: ${DEFAULT-VALUE}.")
    String host = "127.0.0.1";

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        return HandoffTransportBench.run(this, spec.commandLine());
    }
}
