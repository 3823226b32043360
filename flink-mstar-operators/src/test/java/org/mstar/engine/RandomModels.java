package org.mstar.engine;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.Architecture;
import org.mstar.model.GenerationConfig;
import org.mstar.model.ModelConfig;
import org.mstar.model.RopeScaling;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;

/** Small random checkpoints written to disk and loaded back through the real loading code. */
final class RandomModels {
    static final int VOCAB = 320;

    private RandomModels() {}

    static ModelConfig llama() {
        return ModelConfig.builder(Architecture.LLAMA)
                .hiddenSize(64).intermediateSize(128).numLayers(2).numHeads(4).numKvHeads(2).headDim(16)
                .ropeTheta(10_000).ropeScaling(RopeScaling.llama3(8.0, 1.0, 4.0, 64))
                .maxPositionEmbeddings(512).vocabSize(VOCAB).bosTokenId(0).eosTokenId(1).dtype(DType.F32).build();
    }

    static ModelConfig qwen2() {
        return ModelConfig.builder(Architecture.QWEN2)
                .hiddenSize(48).intermediateSize(96).numLayers(2).numHeads(6).numKvHeads(2).headDim(8)
                .ropeTheta(1_000_000).tieWordEmbeddings(true)
                .maxPositionEmbeddings(512).vocabSize(VOCAB).bosTokenId(0).eosTokenId(1).dtype(DType.F32).build();
    }

    static ModelConfig mistral() {
        return ModelConfig.builder(Architecture.MISTRAL)
                .hiddenSize(32).intermediateSize(64).numLayers(2).numHeads(4).numKvHeads(1).headDim(8)
                .slidingWindow(6, 0)
                .maxPositionEmbeddings(512).vocabSize(VOCAB).bosTokenId(0).eosTokenId(1).dtype(DType.F32).build();
    }

    /** Writes a random checkpoint of {@code config} into {@code dir} and loads it on the CPU in fp32. */
    static LlamaModel load(ModelConfig config, long seed, Path dir, CpuDevice cpu) throws IOException {
        CheckpointWriter.writeRandom(config, DType.F32, seed, dir);
        LlamaWeights w = LlamaWeights.load(dir, cpu, DType.F32);
        return new LlamaModel(w, DType.F32, "random:" + seed);
    }

    static LlamaEngine engine(LlamaModel model, EngineOptions options) {
        return new LlamaEngine(model, null, GenerationConfig.of(model.config()), options, DType.F32);
    }

    static EngineOptions options(int rows, int budget, int pages, int pageSize, int offloadPages) {
        return new EngineOptions(rows, budget, KvCacheOptions.builder().maxSeqLen(256).maxNumPages(pages)
                .pageSize(pageSize).cpuOffloadPages(offloadPages).build());
    }

    /** Prompt tokens avoiding the special ids 0 and 1. */
    static int[] prompt(Random rnd, int length) {
        int[] t = new int[length];
        for (int i = 0; i < length; i++) {
            t[i] = 2 + rnd.nextInt(VOCAB - 2);
        }
        return t;
    }

    static List<Integer> none() {
        return List.of();
    }
}
