package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.configuration.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.DType;
import org.mstar.device.Fp8Weight;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.TokenOutput;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.WeightQuantization;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.resources.SamplingReqConfig;

/** Weights load once per process and device, and outlive the engines (subtasks, restarts) that use them. */
class SharedModelsTest {

    @Test
    void enginesOnOneDeviceShareWeightsLoadedOnce(@TempDir Path dir) throws Exception {
        CheckpointWriter.writeRandom(tinyLlama(DType.F32), DType.F32, 5, dir);
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, dir.toString());
        LlamaEngineFactory factory = new LlamaEngineFactory(conf);

        int before = SharedModels.loads();
        GenerationEngine first = factory.create("cpu", 0);
        GenerationEngine second = factory.create("cpu", 1);
        assertThat(SharedModels.loads()).isEqualTo(before + 1);

        first.close();
        List<Integer> fromSecond = generate(second);
        second.close();
        GenerationEngine restarted = factory.create("cpu", 0);
        assertThat(SharedModels.loads()).as("a restarted task reuses the loaded weights").isEqualTo(before + 1);
        assertThat(generate(restarted)).isEqualTo(fromSecond);
        restarted.close();
    }

    @Test
    void fp8QuantizationKeyLoadsItsOwnCopyWithFp8Projections(@TempDir Path dir) throws Exception {
        CheckpointWriter.writeRandom(tinyLlama(DType.BF16), DType.BF16, 6, dir);
        Configuration plain = new Configuration();
        plain.set(GenerateOptions.MODEL_DIR, dir.toString());
        Configuration fp8 = plain.clone();
        fp8.set(LlamaEngineOptions.QUANTIZATION, "fp8");

        int before = SharedModels.loads();
        GenerationEngine bf16Engine = new LlamaEngineFactory(plain).create("cpu", 0);
        GenerationEngine fp8Engine = new LlamaEngineFactory(fp8).create("cpu", 0);
        assertThat(SharedModels.loads()).as("FP8 weights are a copy of their own").isEqualTo(before + 2);
        LlamaWeights weights = SharedModels.get(dir, "cpu", WeightQuantization.FP8).weights();
        assertThat(weights.layer(0).qkvWeight()).isInstanceOf(Fp8Weight.class);
        assertThat(weights.lmHead()).isNotInstanceOf(Fp8Weight.class);
        assertThat(weights.byteSize()).isLessThan(SharedModels.get(dir, "cpu", WeightQuantization.NONE).weights().byteSize());
        assertThat(generate(fp8Engine)).hasSize(5);
        bf16Engine.close();
        fp8Engine.close();
    }

    @Test
    void hybridEnginesOnOneDeviceShareWeightsLoadedOnce() throws Exception {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, "src/test/resources/org/mstar/model/fixtures/bamba");
        LlamaEngineFactory factory = new LlamaEngineFactory(conf);

        int before = SharedModels.loads();
        GenerationEngine first = factory.create("cpu", 0);
        GenerationEngine second = factory.create("cpu", 1);
        assertThat(SharedModels.loads()).isEqualTo(before + 1);

        List<Integer> fromFirst = generate(first);
        first.close();
        assertThat(generate(second)).as("closing one engine leaves the shared weights to the other")
                .isEqualTo(fromFirst);
        second.close();
    }

    private static ModelConfig tinyLlama(DType dtype) {
        return ModelConfig.builder(Architecture.LLAMA)
                .hiddenSize(32).intermediateSize(64).numLayers(1).numHeads(2).numKvHeads(1).headDim(16)
                .maxPositionEmbeddings(128).vocabSize(300).bosTokenId(0).eosTokenId(1).dtype(dtype).build();
    }

    private static List<Integer> generate(GenerationEngine engine) {
        engine.submit(GenerationRequest.builder("r").promptTokenIds(new int[] {5, 6, 7, 8})
                .sampling(SamplingReqConfig.greedy()).maxTokens(5).ignoreEos(true).build());
        List<Integer> tokens = new ArrayList<>();
        while (engine.hasWork()) {
            for (TokenOutput t : engine.step().tokens()) {
                tokens.add(t.tokenId());
            }
        }
        return tokens;
    }
}
