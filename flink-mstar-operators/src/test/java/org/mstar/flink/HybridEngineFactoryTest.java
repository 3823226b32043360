package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.util.InstantiationUtil;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.engine.EngineRole;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.StepResult;
import org.mstar.engine.TokenOutput;
import org.mstar.model.io.SafetensorsFile;
import org.mstar.resources.SamplingReqConfig;

/**
 * A job that names a Mamba2 or Bamba folder gets the hybrid engine from the default factory (config.json's
 * architecture decides): transformers' greedy tokens out, after the factory travelled serialised as in a job graph.
 * The prefix cache is on as for the Llama families: a repeated long prompt resumes from a state snapshot. What these
 * models are not served with is refused by name where the job is built.
 */
class HybridEngineFactoryTest {
    private static Path fixture(String arch) {
        return Path.of("src/test/resources/org/mstar/model/fixtures/" + arch);
    }

    private static Configuration conf(String arch) {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, fixture(arch).toString());
        return conf;
    }

    @ParameterizedTest
    @ValueSource(strings = {"mamba2", "bamba"})
    void theDefaultFactoryServesAHybridFolderWithTheHybridEngine(String arch) throws Exception {
        EngineFactory factory = InstantiationUtil.clone(new LlamaEngineFactory(conf(arch)));
        int[] prompt;
        int[] expected;
        try (SafetensorsFile ref = SafetensorsFile.open(fixture(arch).resolve("reference.safetensors"))) {
            prompt = ints(ref, "prompt.1");
            expected = Arrays.copyOf(ints(ref, "tokens.1"), 24);
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

    @Test
    void aRepeatedPromptResumesFromItsCachedStateWithTheSameTokens() throws Exception {
        int[] prompt;
        try (SafetensorsFile ref = SafetensorsFile.open(fixture("bamba").resolve("reference.safetensors"))) {
            int[] part = ints(ref, "prompt.2");
            prompt = new int[200]; // past the first snapshot, 128 tokens in
            for (int i = 0; i < prompt.length; i++) {
                prompt[i] = part[i % part.length];
            }
        }
        try (GenerationEngine engine = new LlamaEngineFactory(conf("bamba")).create("cpu", 0)) {
            List<List<Integer>> tokens = new ArrayList<>();
            List<Integer> cached = new ArrayList<>();
            for (String id : List.of("first", "again")) {
                engine.submit(GenerationRequest.builder(id).promptTokenIds(prompt)
                        .sampling(SamplingReqConfig.greedy()).maxTokens(12).ignoreEos(true).build());
                List<Integer> out = new ArrayList<>();
                while (engine.hasWork()) {
                    StepResult r = engine.step();
                    assertThat(r.failures()).isEmpty();
                    r.tokens().stream().map(TokenOutput::tokenId).forEach(out::add);
                    r.finished().forEach(f -> cached.add(f.cachedPromptTokens()));
                }
                tokens.add(out);
            }
            assertThat(cached).containsExactly(0, 128);
            assertThat(tokens.get(1)).isEqualTo(tokens.get(0));
        }
    }

    @Test
    void whatTheseModelsAreNotServedWithIsRefusedByName() {
        refused(c -> c.set(LlamaEngineOptions.CPU_OFFLOAD_PAGES, 8), "mstar.kv.cpu-offload-pages");
        refused(c -> c.set(LlamaEngineOptions.QUANTIZATION, "fp8"), "mstar.engine.quantization=fp8");
        refused(c -> c.set(LlamaEngineOptions.ADAPTERS_DIR, "/adapters"), "LoRA adapters");
        refused(c -> c.set(LlamaEngineOptions.KV_CACHE_DTYPE, "fp8_e4m3"), "mstar.kv.cache-dtype=fp8_e4m3");
        refused(c -> c.set(DisaggregationOptions.ENGINE_ROLE, EngineRole.PREFILL), "disaggregated prefill and decode");
    }

    private static void refused(Consumer<Configuration> option, String named) {
        Configuration conf = conf("bamba");
        option.accept(conf);
        assertThatThrownBy(() -> new LlamaEngineFactory(conf)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("keeps a recurrent state per request and is served without " + named);
    }

    private static int[] ints(SafetensorsFile f, String name) throws Exception {
        IntBuffer b = f.bytes(name).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
        int[] out = new int[b.remaining()];
        b.get(out);
        return out;
    }
}
