package org.mstar.jobs;

import java.nio.file.Files;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/** The model and device flags of the benchmarks that serve through the engine and the job. */
final class BenchModelFlags {
    /** A model folder, and the seed of random weights of its geometry (null: its safetensors). */
    record Resolved(Path dir, Long randomSeed) {}

    @Option(names = "--device", paramLabel = "cpu|cuda:N", description = "Default: ${DEFAULT-VALUE}.")
    String device = "cpu";

    @Option(names = "--random", paramLabel = "CONFIG",
            description = "Random weights (made on the device) of this config.json's geometry. Default: the bundled"
                    + " tiny Llama.")
    String randomConfig;

    @Option(names = "--model", paramLabel = "DIR", description = "Serve this model folder instead of random weights.")
    String model;

    /** The model folder; for random weights one made under {@code work} with the config alone. */
    Resolved resolve(Path work) throws Exception {
        if (model != null) {
            return new Resolved(Path.of(model), null);
        }
        Path dir = Files.createDirectories(work.resolve("model"));
        PipelineBench.writeConfig(randomConfig, dir.resolve(org.mstar.model.ModelConfig.FILE_NAME));
        return new Resolved(dir, ModelSource.RANDOM_SEED);
    }

    /** For tables and files: the folder, or which random weights. */
    String describe() {
        return model != null ? model : "random weights of " + (randomConfig == null ? "the bundled tiny Llama"
                : randomConfig);
    }
}
