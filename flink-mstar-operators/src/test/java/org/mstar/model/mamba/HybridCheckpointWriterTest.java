package org.mstar.model.mamba;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.HybridConfig;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * A random Mamba2 or Bamba checkpoint written as a model folder (the geometry of the fixtures' config.json) loads
 * back as the same config and bit for bit the same weights as {@link HybridWeights#random} draws, with a tokenizer.
 */
class HybridCheckpointWriterTest {
    @ParameterizedTest
    @ValueSource(strings = {"mamba2", "bamba"})
    void aRandomCheckpointLoadsBackAsTheSameWeights(String arch, @TempDir Path dir) throws Exception {
        Path fixture = Path.of("src/test/resources/org/mstar/model/fixtures/" + arch);
        JsonNode json = new ObjectMapper().readTree(fixture.resolve("config.json").toFile());
        HybridConfig config = HybridConfig.fromJson(json, arch);
        HybridCheckpointWriter.writeRandom(config, json, 11, dir);

        assertThat(HybridConfig.isHybrid(dir)).isTrue();
        assertThat(HybridConfig.load(dir)).isEqualTo(config);
        try (CpuDevice cpu = new CpuDevice(1);
             HybridWeights drawn = HybridWeights.random(config, cpu, DType.F32, 11);
             HybridWeights loaded = HybridWeights.load(dir, config, cpu, DType.F32);
             TextTokenizer tokenizer = TextTokenizer.load(dir)) {
            for (Map.Entry<String, Tensor> e : drawn.hfTensors().entrySet()) {
                assertThat(cpu.toFloats(loaded.hfTensors().get(e.getKey()))).as(e.getKey())
                        .containsExactly(cpu.toFloats(e.getValue()));
            }
            assertThat(tokenizer.encode("hello")).isNotEmpty();
        }
    }
}
