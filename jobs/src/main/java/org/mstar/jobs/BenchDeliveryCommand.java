package org.mstar.jobs;

import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code mstar bench-delivery}: the flags; {@link DeliveryBench} runs it (see {@link ServeCommand} for why). */
@Command(name = "bench-delivery", mixinStandardHelpOptions = true,
        description = "Measure how soon tokens reach a consumer under EXACTLY_ONCE (per checkpoint interval) and"
                + " AT_LEAST_ONCE, with Kafka, Flink and a tiny random Llama in this process.")
final class BenchDeliveryCommand implements Callable<Integer> {
    @Option(names = "--checkpoint-interval", paramLabel = "SECONDS", split = ",",
            description = "One EXACTLY_ONCE run per interval; AT_LEAST_ONCE runs with the last. Default: 1,5.")
    List<Double> checkpointSeconds = List.of(1.0, 5.0);

    @Option(names = "--requests", paramLabel = "N", description = "Measured requests per run. Default: ${DEFAULT-VALUE}.")
    int requests = 20;

    @Option(names = "--max-tokens", paramLabel = "N", description = "Tokens per request (EOS ignored). Default: ${DEFAULT-VALUE}.")
    int maxTokens = 32;

    @Option(names = "--spacing", paramLabel = "MILLIS",
            description = "Time between two requests, spreading them over the checkpoint cycle. Default: ${DEFAULT-VALUE}.")
    long spacingMillis = 250;

    @Option(names = "--buffer-timeout", paramLabel = "MILLIS",
            description = "Flink's execution.buffer-timeout.interval: how long records may wait in a network buffer."
                    + " Default: Flink's (100 ms).")
    Long bufferTimeoutMillis;

    @Option(names = "--timeout", paramLabel = "SECONDS", description = "Per run. Default: ${DEFAULT-VALUE}.")
    long timeoutSeconds = 300;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        return DeliveryBench.run(this, spec.commandLine());
    }
}
