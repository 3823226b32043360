package org.mstar.jobs;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import org.mstar.device.DType;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.CheckpointWriter;

/**
 * A small Llama with random weights and a synthetic byte-level tokenizer, written as a model folder: tests run
 * the real engine on it. Its text is noise; everything from
 * tokenisation through paged attention and sampling to detokenisation is the real serving path.
 */
final class RandomModel {
    private RandomModel() {}

    static final ModelConfig CONFIG = ModelConfig.builder(Architecture.LLAMA)
            .hiddenSize(64).intermediateSize(128).numLayers(2).numHeads(4).numKvHeads(2).headDim(16)
            .ropeTheta(10_000).maxPositionEmbeddings(512).vocabSize(320).bosTokenId(0).eosTokenId(1)
            .dtype(DType.F32).build();

    /** Writes the model into {@code folder}; the same seed gives the same weights. */
    static void write(Path folder, long seed) throws IOException {
        CheckpointWriter.writeRandom(CONFIG, DType.F32, seed, folder);
    }

    /**
     * Writes a model of the geometry {@code mstar demo} serves (hidden 256, 4 layers, vocab 4096) into {@code
     * folder}: big enough that generation on a CPU spans several short checkpoint intervals.
     */
    static void writeBundledGeometry(Path folder, long seed) throws IOException {
        Path config = Files.createTempFile("tiny-llama", ".json");
        try (InputStream in = ModelSource.class.getResourceAsStream(ModelSource.BUNDLED_CONFIG)) {
            Files.write(config, in.readAllBytes());
            CheckpointWriter.writeRandom(ModelConfig.load(config), DType.F32, seed, folder);
        } finally {
            Files.delete(config);
        }
    }
}
