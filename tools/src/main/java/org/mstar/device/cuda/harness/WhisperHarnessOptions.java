package org.mstar.device.cuda.harness;

import java.nio.file.Path;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/** {@link WhisperHarness}'s command line. */
@Command(name = "WhisperHarness", sortOptions = false,
        description = "Whisper on the GPU: the CUDA engine's fidelity against transformers, then decode throughput.")
final class WhisperHarnessOptions implements HarnessCommandLine.Options {
    @Option(names = "--fixture", paramLabel = "DIR",
            description = "the tiny Whisper checkpoint with transformers' references (needed unless --perf-only)")
    Path fixture;

    @Option(names = "--out", paramLabel = "DIR",
            description = "folder of whisper.md and whisper-perf.md (default: the working directory)")
    Path out = Path.of(".");

    @Option(names = "--no-perf", description = "the checks only, no throughput tables")
    boolean noPerf;

    @Option(names = "--perf-only", description = "the throughput tables only, no checks")
    boolean perfOnly;

    @Option(names = "--profile-decode", paramLabel = "MODEL:BATCH",
            description = "only a few graphed decode steps (MODEL small or large-v3), for a profiler")
    String profiled;

    @Option(names = "--help", usageHelp = true, description = "print these options and exit")
    boolean help;

    @Override
    public void check(CommandLine line) {
        if (profiled != null) {
            if (!profiled.matches("(small|large-v3):\\d+")) {
                throw new ParameterException(line, "--profile-decode takes MODEL:BATCH with MODEL small or large-v3, "
                        + "got " + profiled);
            }
            return;
        }
        if (fixture == null && !perfOnly) {
            throw new ParameterException(line, "--fixture DIR (the tiny Whisper checkpoint with its references) is "
                    + "required unless --perf-only");
        }
    }
}
