package org.mstar.jobs;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import org.mstar.device.DType;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.resources.kv.PrefixKeys;

/**
 * Where a command's model comes from: a Hugging Face folder, or random weights of a given geometry
 * written once as a complete checkpoint (config, safetensors, tokenizer) under
 * {@code ~/.cache/mstar/random-<digest>} so the real loading code serves it.
 */
final class ModelSource {
    /** The geometry used when {@code --random} names no config. */
    static final String BUNDLED_CONFIG = "tiny-llama.json";
    static final long RANDOM_SEED = 42;

    private ModelSource() {}

    /**
     * @param modelDir a model folder, or null
     * @param randomConfig a config.json path, "" for the bundled tiny Llama, or null
     */
    static Path resolve(Path modelDir, String randomConfig) {
        if (modelDir != null && randomConfig != null) {
            throw new IllegalArgumentException("give --model or --random, not both");
        }
        if (modelDir != null) {
            if (!Files.isRegularFile(modelDir.resolve(ModelConfig.FILE_NAME))) {
                throw new IllegalArgumentException(modelDir + " has no " + ModelConfig.FILE_NAME);
            }
            return modelDir;
        }
        return randomCheckpoint(randomConfig == null ? "" : randomConfig);
    }

    static boolean isRandom(Path modelDir) {
        return modelDir == null;
    }

    private static Path randomCheckpoint(String configPath) {
        try {
            byte[] configJson = configPath.isEmpty() ? bundled() : Files.readAllBytes(Path.of(configPath));
            String digest = HexFormat.of().formatHex(PrefixKeys.fingerprint(configJson, RANDOM_SEED)).substring(0, 16);
            Path dir = Path.of(System.getProperty("user.home"), ".cache", "mstar", "random-" + digest);
            if (!Files.isRegularFile(dir.resolve(".complete"))) {
                Path config = Files.createTempFile("mstar-config", ".json");
                Files.write(config, configJson);
                ModelConfig cfg = ModelConfig.load(config);
                Files.delete(config);
                Files.createDirectories(dir);
                CheckpointWriter.writeRandom(cfg, DType.F32, RANDOM_SEED, dir);
                Files.createFile(dir.resolve(".complete"));
            }
            return dir;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write a random checkpoint", e);
        }
    }

    private static byte[] bundled() throws IOException {
        try (InputStream in = ModelSource.class.getResourceAsStream(BUNDLED_CONFIG)) {
            if (in == null) {
                throw new IOException("bundled model config " + BUNDLED_CONFIG + " is missing from the jar");
            }
            return in.readAllBytes();
        }
    }
}
