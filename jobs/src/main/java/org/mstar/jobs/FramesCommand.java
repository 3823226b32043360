package org.mstar.jobs;

import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/** {@code mstar frames}: the flags; {@link FramesDemo} runs it. */
@Command(name = "frames", mixinStandardHelpOptions = true,
        description = "Start Kafka and Flink in this process, run the frame-session job (exactly once) and stream"
                + " several sessions' frames through it: each session opens with a frame, then each action record"
                + " gets the next frame back.")
final class FramesCommand implements Callable<Integer> {
    @Option(names = "--model", paramLabel = "DIR",
            description = "Frame model folder (frame_config.json + model.safetensors, docs/guides/frames.md). Default: a small"
                    + " random frame model, written to a temporary folder.")
    String model;

    @Option(names = "--write-random", paramLabel = "DIR",
            description = "Write the small random frame model to DIR (a folder --model reads) and exit.")
    String writeRandom;

    @Option(names = "--sessions", paramLabel = "N", description = "Concurrent sessions. Default: ${DEFAULT-VALUE}.")
    int sessions = 4;

    @Option(names = "--frames", paramLabel = "N", description = "Action records per session after its OPEN. Default: ${DEFAULT-VALUE}.")
    int frames = 8;

    @Option(names = "--resident", paramLabel = "N",
            description = "Rings per subtask; sessions beyond them wait until one closes. Default: ${DEFAULT-VALUE}.")
    int resident = 2;

    @Option(names = "--parallelism", paramLabel = "N", description = "Session operator subtasks. Default: ${DEFAULT-VALUE}.")
    int parallelism = 1;

    @Option(names = "--device", paramLabel = "cpu|cuda:N", description = "Default: ${DEFAULT-VALUE}.")
    String device = "cpu";

    @Option(names = "--dtype", paramLabel = "F32|BF16|F16", description = "Default: ${DEFAULT-VALUE}.")
    String dtype = "F32";

    @Option(names = "--timeout", paramLabel = "SECONDS", description = "Default: ${DEFAULT-VALUE}.")
    long timeoutSeconds = 300;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        return FramesDemo.run(this, spec.commandLine());
    }
}
