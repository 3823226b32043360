package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.Architecture;
import org.mstar.model.LatentAttention;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.LlamaModel;

/**
 * DeepSeek-V2 (every layer dense) on random weights, through the engine's absorbed latent attention over latent KV
 * pages, against {@link DenseDeepseekReference} (transformers' decompressed form): the query straight from q_proj and
 * through the low-rank q_a_proj / q_a_layernorm / q_b_proj, prompts in chunks beside decodes, prefix-cache hits on
 * latent pages, preemption with and without host offload, and decode graphs. Relative error within 1e-4.
 */
class LatentAttentionEquivalenceTest {

    static Stream<Arguments> models() {
        return Stream.of(
                Arguments.of("q_proj", 0, 0, false),
                Arguments.of("q_lora_rank 24", 24, 0, false),
                Arguments.of("q_lora_rank 24, offload", 24, 64, false),
                Arguments.of("q_proj, graphs", 0, 0, true));
    }

    private static ModelConfig deepseek(int qLoraRank) {
        return ModelConfig.builder(Architecture.DEEPSEEK_V2)
                .hiddenSize(64).intermediateSize(96).numLayers(2).numHeads(4).headDim(16)
                .latentAttention(new LatentAttention(qLoraRank, 32, 24, 16, 20)).rmsNormEps(1e-6)
                .maxPositionEmbeddings(512).vocabSize(RandomModels.VOCAB).bosTokenId(0).eosTokenId(1).dtype(DType.F32)
                .build();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("models")
    void logitsMatchDenseReference(String name, int qLoraRank, int offloadPages, boolean graphs, @TempDir Path dir)
            throws Exception {
        try (CpuDevice cpu = new CpuDevice(2); LlamaModel model = RandomModels.load(deepseek(qLoraRank), 7, dir, cpu)) {
            DenseDeepseekReference reference = new DenseDeepseekReference(model.weights());
            // 4 rows, 16 tokens a step, pages of 4 tokens, 13 usable pages: prompts chunk and requests get preempted
            LlamaEngine engine = RandomModels.engine(model,
                    RandomModels.options(4, 16, 14, 4, offloadPages).withDecodeGraphs(graphs));
            Map<String, List<float[]>> logits = new HashMap<>();
            engine.observeLogits((rid, index, l) -> logits.computeIfAbsent(rid, k -> new ArrayList<>()).add(l));
            Random rnd = new Random(11);
            int[] shared = RandomModels.prompt(rnd, 13);
            Map<String, int[]> prompts = new HashMap<>();
            for (int i = 0; i < 5; i++) {
                prompts.put("r" + i, i == 0 ? shared : RandomModels.prompt(rnd, 5 + 6 * i));
            }
            EngineDriver driver = new EngineDriver();
            prompts.forEach((rid, p) -> engine.submit(EngineEquivalenceTest.request(rid, p)));
            driver.drain(engine, 500);
            // later prompts extending r0's prompt hit the prefix cache
            for (int i = 0; i < 3; i++) {
                int[] p = EngineEquivalenceTest.concat(shared, RandomModels.prompt(rnd, 3 + i));
                prompts.put("s" + i, p);
                engine.submit(EngineEquivalenceTest.request("s" + i, p));
            }
            driver.drain(engine, 500);

            assertThat(driver.failures).isEmpty();
            assertThat(engine.stats().prefixHitTokens()).as("prefix-cache hits").isPositive();
            assertThat(engine.stats().preemptions()).as("preemptions").isPositive();
            assertThat(engine.decodeGraphReplays() > 0).as("decode steps replayed").isEqualTo(graphs);
            EngineEquivalenceTest.assertEveryTokenClose(prompts, driver, logits, reference::lastLogits);
            engine.close();
        }
    }
}
