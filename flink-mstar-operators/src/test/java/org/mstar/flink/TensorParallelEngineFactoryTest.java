package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.util.InstantiationUtil;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.StepResult;
import org.mstar.engine.TokenOutput;
import org.mstar.model.io.SafetensorsFile;
import org.mstar.resources.SamplingReqConfig;

/**
 * A job with {@code mstar.engine.tensor-parallel} 2 gets from the default factory an engine over two CPU devices
 * that generates transformers' greedy tokens of the checkpoint fixtures: per-head q/k norms (Qwen3), sandwich norms,
 * sliding-window layers and scaled embeddings (Gemma 3), and routed experts placed across the devices (Qwen3-MoE).
 */
class TensorParallelEngineFactoryTest {

    @ParameterizedTest
    @ValueSource(strings = {"qwen3", "gemma3_text", "qwen3_moe"})
    void twoDevicesGenerateTransformersTokens(String arch) throws Exception {
        Path dir = Path.of("src/test/resources/org/mstar/model/fixtures/" + arch);
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, dir.toString());
        conf.set(LlamaEngineOptions.TENSOR_PARALLEL, 2);
        EngineFactory factory = InstantiationUtil.clone(new LlamaEngineFactory(conf));
        int[] prompt;
        int[] expected;
        try (SafetensorsFile ref = SafetensorsFile.open(dir.resolve("reference.safetensors"))) {
            prompt = ints(ref, "prompt.1");
            expected = Arrays.copyOf(ints(ref, "tokens.1"), 16);
        }
        try (GenerationEngine engine = factory.create("cpu", 0)) {
            engine.submit(GenerationRequest.builder("r").promptTokenIds(prompt).sampling(SamplingReqConfig.greedy())
                    .maxTokens(expected.length).ignoreEos(true).build());
            List<Integer> tokens = new ArrayList<>();
            while (engine.hasWork()) {
                StepResult r = engine.step();
                assertThat(r.failures()).isEmpty();
                r.tokens().stream().map(TokenOutput::tokenId).forEach(tokens::add);
            }
            assertThat(tokens).containsExactly(Arrays.stream(expected).boxed().toArray(Integer[]::new));
        }
    }

    private static int[] ints(SafetensorsFile f, String name) throws Exception {
        IntBuffer b = f.bytes(name).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
        int[] out = new int[b.remaining()];
        b.get(out);
        return out;
    }
}
