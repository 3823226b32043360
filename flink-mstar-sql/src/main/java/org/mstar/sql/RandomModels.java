package org.mstar.sql;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.stream.Stream;
import org.mstar.device.DType;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.resources.kv.PrefixKeys;

/**
 * The model folder of {@link MstarModelOptions#MODEL_RANDOM}: random weights of a geometry, written once per machine
 * as a complete checkpoint (config, safetensors, tokenizer) under {@code ~/.cache/mstar/random-<digest>}, so the real
 * loading code serves it. Same seed and digest as the command line's {@code --random}, so both find one folder.
 */
final class RandomModels {
    static final String TINY = "tiny";
    private static final String TINY_CONFIG = "tiny-llama.json";
    private static final long SEED = 42;

    private RandomModels() {}

    /**
     * The folder of {@code spec} ('tiny' or a config.json path), written if missing. A folder is written into a
     * scratch folder beside it and moved into place complete, so subtasks and processes writing at once each end up
     * with the same whole checkpoint.
     *
     * @throws IllegalArgumentException naming the option when the config cannot be read or is not a model config
     */
    static synchronized Path folder(String spec) {
        byte[] configJson;
        ModelConfig config;
        try {
            configJson = spec.equals(TINY) ? tinyConfig() : Files.readAllBytes(Path.of(spec));
            config = ModelConfig.fromJson(new ObjectMapper().readTree(configJson), spec);
        } catch (IOException | RuntimeException e) {
            throw new IllegalArgumentException("'" + MstarModelOptions.MODEL_RANDOM.key() + "' = '" + spec + "': "
                    + e.getMessage(), e);
        }
        String digest = HexFormat.of().formatHex(PrefixKeys.fingerprint(configJson, SEED)).substring(0, 16);
        Path dir = Path.of(System.getProperty("user.home"), ".cache", "mstar", "random-" + digest);
        if (Files.isRegularFile(dir.resolve(".complete"))) {
            return dir;
        }
        Path scratch = null;
        try {
            Files.createDirectories(dir.getParent());
            scratch = Files.createTempDirectory(dir.getParent(), dir.getFileName() + ".partial-");
            CheckpointWriter.writeRandom(config, DType.F32, SEED, scratch);
            Files.createFile(scratch.resolve(".complete"));
            Files.move(scratch, dir, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            if (Files.isRegularFile(dir.resolve(".complete"))) {
                return dir; // another process moved its copy into place first
            }
            throw new UncheckedIOException("cannot write a random checkpoint to " + dir, e);
        } finally {
            deleteQuietly(scratch);
        }
        return dir;
    }

    private static byte[] tinyConfig() throws IOException {
        try (InputStream in = RandomModels.class.getResourceAsStream(TINY_CONFIG)) {
            if (in == null) {
                throw new IOException("the bundled " + TINY_CONFIG + " is missing from the jar");
            }
            return in.readAllBytes();
        }
    }

    private static void deleteQuietly(Path dir) {
        if (dir == null || !Files.exists(dir)) {
            return;
        }
        try (Stream<Path> files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        } catch (IOException | UncheckedIOException e) {
            // best effort: a scratch folder named .partial- under the cache
        }
    }
}
