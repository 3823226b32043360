package org.mstar.jobs;

import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code mstar demo}: the flags; {@link Demo} runs it (see {@link ServeCommand} for why they are apart). */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = "Start Kafka and Flink in this process, send prompts and stream the answers.")
final class DemoCommand implements Callable<Integer> {
    static final List<String> DEFAULT_PROMPTS = List.of(
            "The capital of France is",
            "Write a haiku about stream processing.",
            "Explain what a KV cache is in one sentence.");

    @Option(names = "--model", paramLabel = "DIR",
            description = "Model folder (Hugging Face layout). Default: a small random Llama, whose text is noise.")
    String model;

    @Option(names = "--engine-factory", paramLabel = "CLASS",
            description = "EngineFactory class with a public (ReadableConfig) constructor. Default: the Llama engine.")
    String engineFactory;

    @Option(names = "--device", paramLabel = "cpu|cuda:N", description = "Default: ${DEFAULT-VALUE}.")
    String device = "cpu";

    @Option(names = "--prompt", paramLabel = "TEXT", description = "A prompt to send; repeatable. Default: three examples.")
    List<String> prompts = DEFAULT_PROMPTS;

    @Option(names = "--parallelism", paramLabel = "N", description = "Generate subtasks. Default: ${DEFAULT-VALUE}.")
    int parallelism = 1;

    @Option(names = "--disaggregated",
            description = "Prefill and decode in separate operators (--parallelism subtasks each), KV handed between them.")
    boolean disaggregated;

    @Option(names = "--timeout", paramLabel = "SECONDS", description = "Default: ${DEFAULT-VALUE}.")
    long timeoutSeconds = 300;

    @Mixin
    SamplingFlags sampling;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        return Demo.run(this, spec.commandLine());
    }
}
