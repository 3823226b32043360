package org.mstar.engine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.constraint.OutputConstraint;

/**
 * A tiny random-weight Llama with its synthetic byte-level tokenizer (320 ids: BOS, EOS, the 256 bytes, some
 * merges), loaded through the real loader, for structured-output tests: its text is noise, so whatever structure
 * the output has comes from the constraint.
 */
final class StructuredOutputModel {
    static final ModelConfig CONFIG = ModelConfig.builder(Architecture.LLAMA)
            .hiddenSize(64).intermediateSize(128).numLayers(2).numHeads(4).numKvHeads(2).headDim(16)
            .ropeTheta(10_000).maxPositionEmbeddings(2048).vocabSize(320).bosTokenId(0).eosTokenId(1)
            .dtype(DType.F32).build();

    private StructuredOutputModel() {}

    /** Writes the checkpoint (weights from {@code seed}) into a fresh folder under {@code parent}. */
    static Path write(Path parent, long seed) throws IOException {
        Path dir = Files.createDirectories(parent.resolve("model-" + seed));
        CheckpointWriter.writeRandom(CONFIG, DType.F32, seed, dir);
        return dir;
    }

    static LlamaEngine engine(Path dir, CpuDevice cpu, int rows) {
        int maxSeqLen = 2048;
        return LlamaEngineLoader.load(dir, cpu, new EngineOptions(rows, 4096,
                KvCacheOptions.builder().maxSeqLen(maxSeqLen).maxNumPages(rows * (maxSeqLen / 16) + 2).build()));
    }

    /** Temperature {@code temperature} (1: the model's own distribution; 0: greedy), seeded. */
    static GenerationRequest request(String id, String prompt, double temperature, long seed, int maxTokens,
                                     OutputConstraint constraint) {
        SamplingReqConfig sampling = new SamplingReqConfig(temperature, 0, 1.0, false, 1.0, 0.0, 0, 0, false, 1, true,
                seed);
        return GenerationRequest.builder(id).promptText(prompt).sampling(sampling).maxTokens(maxTokens)
                .constraint(constraint).build();
    }
}
