package org.mstar.jobs;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.mstar.device.DType;
import org.mstar.device.Mamba2Shape;
import org.mstar.model.HybridConfig;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelFormatException;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.model.lora.RandomPeftAdapters;
import org.mstar.model.mamba.HybridCheckpointWriter;
import org.mstar.resources.kv.PrefixKeys;

/**
 * Where a command's model comes from: a Hugging Face folder, or random weights of a given geometry written once
 * as a complete checkpoint (config, safetensors, tokenizer) under {@code ~/.cache/mstar/random-<digest>}, so the
 * real loading code serves it and later runs (and restarts of {@code serve}) find the same weights. A checkpoint
 * is written into a scratch folder beside it and moved into place when complete; the scratch folder is deleted
 * when writing fails or the command is stopped, so no partial checkpoint is left behind.
 */
public final class ModelSource {
    /** The geometry used when {@code --random} names no config. */
    static final String BUNDLED_CONFIG = "tiny-llama.json";
    static final long RANDOM_SEED = 42;
    /** Random checkpoints at least this large report their progress while being written. */
    private static final long PROGRESS_BYTES = 256L << 20;

    private ModelSource() {}

    /**
     * @param modelDir a model folder, or null
     * @param randomConfig a config.json path, "" for the bundled tiny Llama, or null
     * @param progress where the writing of a large random checkpoint reports its progress
     * @throws IllegalArgumentException naming the flag, when the folder or config is not usable
     */
    public static Path resolve(Path modelDir, String randomConfig, PrintWriter progress) {
        if (modelDir != null && randomConfig != null) {
            throw new IllegalArgumentException("give --model or --random, not both");
        }
        if (modelDir != null) {
            if (!Files.isDirectory(modelDir)) {
                throw new IllegalArgumentException("--model " + modelDir + ": no such folder");
            }
            if (!Files.isRegularFile(modelDir.resolve(ModelConfig.FILE_NAME))) {
                throw new IllegalArgumentException("--model " + modelDir + ": no " + ModelConfig.FILE_NAME + " in it"
                        + " (a model folder in Hugging Face layout holds config.json, *.safetensors and tokenizer.json)");
            }
            return modelDir;
        }
        return randomCheckpoint(randomConfig == null ? "" : randomConfig, progress);
    }

    private static Path randomCheckpoint(String configPath, PrintWriter progress) {
        byte[] configJson;
        long expected;
        ScratchWriter writer;
        try {
            configJson = configPath.isEmpty() ? bundled() : Files.readAllBytes(Path.of(configPath));
            JsonNode root = new ObjectMapper().readTree(configJson);
            String source = configPath.isEmpty() ? BUNDLED_CONFIG : configPath;
            if (root != null && HybridConfig.isHybrid(root)) {
                HybridConfig config = HybridConfig.fromJson(root, source);
                expected = weightBytes(config);
                writer = scratch -> HybridCheckpointWriter.writeRandom(config, root, RANDOM_SEED, scratch);
            } else {
                ModelConfig config = ModelConfig.fromJson(root, source);
                expected = weightBytes(config);
                writer = scratch -> CheckpointWriter.writeRandom(config, DType.F32, RANDOM_SEED, scratch);
            }
        } catch (NoSuchFileException e) {
            throw new IllegalArgumentException("--random " + configPath + ": no such file");
        } catch (IOException | ModelFormatException e) {
            throw new IllegalArgumentException("--random " + configPath + ": " + e.getMessage());
        }
        String digest = HexFormat.of().formatHex(PrefixKeys.fingerprint(configJson, RANDOM_SEED)).substring(0, 16);
        Path dir = Path.of(System.getProperty("user.home"), ".cache", "mstar", "random-" + digest);
        if (Files.isRegularFile(dir.resolve(".complete"))) {
            return dir;
        }
        try {
            write(dir, expected, writer, progress);
            return dir;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write a random checkpoint to " + dir, e);
        }
    }

    /**
     * A folder of {@code count} random LoRA adapters ({@code random-1} ...) for the random checkpoint in {@code
     * modelDir}, written once beside it like the checkpoint: rank 8 on every projection, so that a new user can try
     * {@code send --adapter} without a trained adapter. Their text is noise, each its own.
     */
    public static Path randomAdapters(Path modelDir, int count) {
        if (count < 1) {
            throw new IllegalArgumentException("--random-adapters " + count + ": give 1 or more");
        }
        Path dir = modelDir.resolveSibling(modelDir.getFileName() + "-adapters-" + count);
        if (Files.isRegularFile(dir.resolve(".complete"))) {
            return dir;
        }
        try {
            ModelConfig config = ModelConfig.load(modelDir);
            writeOnce(dir, scratch -> {
                for (int i = 1; i <= count; i++) {
                    RandomPeftAdapters.write(scratch, config, new RandomPeftAdapters.Spec("random-" + i, 8, 16, false,
                            List.of("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")),
                            RANDOM_SEED + i);
                }
            });
            return dir;
        } catch (IOException | ModelFormatException e) {
            throw new IllegalArgumentException("cannot write random adapters to " + dir + ": " + e.getMessage(), e);
        }
    }

    /**
     * Writes a checkpoint of about {@code expected} bytes into {@code dir} ({@link #writeOnce}), reporting the progress
     * of a large one.
     */
    private static void write(Path dir, long expected, ScratchWriter writer, PrintWriter progress) throws IOException {
        ScheduledExecutorService reporter = null;
        if (expected >= PROGRESS_BYTES) {
            progress.printf(Locale.ROOT, "Writing random weights (%.1f GiB, once) to %s%n", gib(expected), dir);
            progress.flush();
            reporter = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "mstar-random-progress");
                t.setDaemon(true);
                return t;
            });
        }
        try {
            ScheduledExecutorService scheduled = reporter;
            writeOnce(dir, scratch -> {
                if (scheduled != null) {
                    scheduled.scheduleAtFixedRate(() -> {
                        progress.printf(Locale.ROOT, "  %.1f of %.1f GiB written%n", gib(size(scratch)), gib(expected));
                        progress.flush();
                    }, 2, 2, TimeUnit.SECONDS);
                }
                writer.write(scratch);
            });
        } finally {
            if (reporter != null) {
                reporter.shutdownNow();
            }
        }
    }

    /** What fills a scratch folder. */
    @FunctionalInterface
    private interface ScratchWriter {
        void write(Path scratch) throws IOException;
    }

    /**
     * Fills a scratch folder beside {@code dir}, marks it complete and moves it into place, so that {@code dir} is
     * whole or absent; the scratch folder is deleted when writing fails or the command is stopped.
     */
    private static void writeOnce(Path dir, ScratchWriter writer) throws IOException {
        Files.createDirectories(dir.getParent());
        Path scratch = Files.createTempDirectory(dir.getParent(), dir.getFileName() + ".partial-");
        Thread cleanup = new Thread(() -> deleteQuietly(scratch), "mstar-random-cleanup");
        Runtime.getRuntime().addShutdownHook(cleanup);
        try {
            writer.write(scratch);
            Files.createFile(scratch.resolve(".complete"));
            Files.move(scratch, dir, StandardCopyOption.ATOMIC_MOVE);
        } finally {
            deleteQuietly(scratch);
            Runtime.getRuntime().removeShutdownHook(cleanup);
        }
    }

    /**
     * f32 bytes of the weights: embeddings, LM head unless tied, and per layer attention, MLP (or router and routed
     * experts) and norms.
     */
    private static long weightBytes(ModelConfig c) {
        long h = c.hiddenSize();
        long q = (long) c.numHeads() * c.headDim();
        long kv = (long) c.numKvHeads() * c.headDim();
        long layers = 0;
        for (int l = 0; l < c.numLayers(); l++) {
            long mlp = 3 * h * c.intermediateSize();
            if (c.moe().isPresent() && c.moe().get().sparse(l)) {
                long experts = c.moe().get().numExperts();
                mlp = experts * (3 * h * c.moe().get().expertIntermediateSize() + h);
            }
            layers += h * q + 2 * h * kv + q * h + mlp + 2 * h;
        }
        long embeddings = (long) c.vocabSize() * h * (c.tieWordEmbeddings() ? 1 : 2);
        return 4 * (embeddings + layers + h);
    }

    /**
     * f32 bytes of Mamba2 or Bamba weights: embeddings, LM head unless tied, final norm, and per layer its norm, then a
     * mixer (projections, convolution, per-head A, dt bias and D, gated norm) or attention, and Bamba's MLP and norm.
     */
    private static long weightBytes(HybridConfig c) {
        long h = c.hiddenSize();
        Mamba2Shape m = c.mixer();
        long mixer = (long) m.projWidth() * h + (long) m.convDim() * (m.convKernel() + 1) + 3L * m.heads()
                + (long) m.inner() * (h + 1);
        long attention = (long) c.attentionHeads() * c.attentionHeadDim() * h * 2
                + 2L * c.kvHeads() * c.attentionHeadDim() * h;
        long mlp = c.intermediateSize() == 0 ? 0 : 3L * h * c.intermediateSize() + h;
        long layers = 0;
        for (int l = 0; l < c.numLayers(); l++) {
            layers += h + (c.isAttention(l) ? attention : mixer) + mlp;
        }
        long embeddings = (long) c.vocabSize() * h * (c.tieWordEmbeddings() ? 1 : 2);
        return 4 * (embeddings + layers + h);
    }

    private static double gib(long bytes) {
        return bytes / (double) (1L << 30);
    }

    private static long size(Path dir) {
        try (Stream<Path> files = Files.walk(dir)) {
            return files.filter(Files::isRegularFile).mapToLong(f -> f.toFile().length()).sum();
        } catch (IOException | UncheckedIOException e) {
            return 0; // the folder moved or went away meanwhile
        }
    }

    private static void deleteQuietly(Path dir) {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        } catch (IOException | UncheckedIOException e) {
            // best effort: a scratch folder under the cache, named .partial-
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
