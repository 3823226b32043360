package org.mstar.model.lora;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.mstar.device.DType;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelFormatException;
import org.mstar.model.io.SafetensorsFile;
import org.mstar.resources.AdapterTarget;
import org.mstar.resources.AdapterWeights;

/**
 * A folder of PEFT adapters read against a model: names, targets, ranks, scaling (plain and rank-stabilised), weights
 * as written, identities; and everything flink-mstar does not apply refused at open, naming the adapter and the key.
 */
class PeftAdaptersTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final ModelConfig MODEL = ModelConfig.builder(Architecture.LLAMA)
            .hiddenSize(32).intermediateSize(48).numLayers(2).numHeads(4).numKvHeads(2).headDim(8)
            .maxPositionEmbeddings(64).vocabSize(50).bosTokenId(0).eosTokenId(1).dtype(DType.F32).build();

    @TempDir
    Path dir;

    @Test
    void readsEveryAdapterWithItsTargetsScaleAndWeights() throws IOException {
        RandomPeftAdapters.write(dir, MODEL, new RandomPeftAdapters.Spec("plain", 4, 8, false,
                List.of("q_proj", "v_proj")), 1);
        RandomPeftAdapters.write(dir, MODEL, new RandomPeftAdapters.Spec("stable", 16, 8, true,
                List.of("v_proj", "down_proj")), 2);
        Files.writeString(dir.resolve("README.md"), "not an adapter");
        Files.createDirectories(dir.resolve(".cache"));

        PeftAdapters lib = PeftAdapters.open(dir, MODEL);

        assertThat(lib.names()).containsExactly("plain", "stable");
        assertThat(lib.maxRank()).isEqualTo(16);
        assertThat(lib.layers()).isEqualTo(2);
        assertThat(lib.targets()).containsExactlyInAnyOrder(new AdapterTarget("q_proj", 32, 32),
                new AdapterTarget("v_proj", 32, 16), new AdapterTarget("down_proj", 48, 32));
        assertThat(lib.config("plain").scale()).isEqualTo(2f); // alpha / r
        assertThat(lib.config("stable").scale()).isEqualTo(2f); // alpha / sqrt(r)

        AdapterWeights w = lib.load("stable");
        assertThat(w.rank()).isEqualTo(16);
        assertThat(w.a()).containsOnlyKeys("v_proj", "down_proj");
        try (SafetensorsFile file = SafetensorsFile.open(dir.resolve("stable").resolve(PeftAdapters.WEIGHTS_FILE))) {
            assertThat(w.a().get("down_proj").get(1))
                    .containsExactly(file.floats("base_model.model.model.layers.1.mlp.down_proj.lora_A.weight"));
            assertThat(w.b().get("v_proj").get(0))
                    .containsExactly(file.floats("base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight"));
        }
        assertThat(lib.identity("plain")).isNotEqualTo(lib.identity("stable"));
    }

    @Test
    void anIdentityFollowsTheFilesNotTheName() throws IOException {
        var spec = new RandomPeftAdapters.Spec("a", 4, 8, false, List.of("q_proj"));
        RandomPeftAdapters.write(dir.resolve("one"), MODEL, spec, 1);
        RandomPeftAdapters.write(dir.resolve("two"), MODEL, spec, 1);
        RandomPeftAdapters.write(dir.resolve("three"), MODEL, spec, 2);
        byte[] one = PeftAdapters.open(dir.resolve("one"), MODEL).identity("a");
        assertThat(PeftAdapters.open(dir.resolve("two"), MODEL).identity("a")).isEqualTo(one);
        assertThat(PeftAdapters.open(dir.resolve("three"), MODEL).identity("a")).isNotEqualTo(one);
    }

    @Test
    void allLinearTargetsEveryProjection() throws IOException {
        RandomPeftAdapters.write(dir, MODEL, new RandomPeftAdapters.Spec("all", 2, 4, false, List.of("q_proj",
                "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")), 1);
        editConfig("all", c -> c.put("target_modules", "all-linear"));
        assertThat(PeftAdapters.open(dir, MODEL).config("all").targets()).containsExactlyInAnyOrder(
                LoraModule.Q_PROJ, LoraModule.K_PROJ, LoraModule.V_PROJ, LoraModule.O_PROJ, LoraModule.GATE_PROJ,
                LoraModule.UP_PROJ, LoraModule.DOWN_PROJ);
    }

    static Stream<Arguments> refusedConfigs() {
        return Stream.of(
                refused("fan_in_fan_out", c -> c.put("fan_in_fan_out", true)),
                refused("bias 'lora_only'", c -> c.put("bias", "lora_only")),
                refused("modules_to_save", c -> c.putArray("modules_to_save").add("lm_head")),
                refused("layers_to_transform", c -> c.putArray("layers_to_transform").add(0)),
                refused("rank_pattern", c -> c.putObject("rank_pattern").put("q_proj", 2)),
                refused("alpha_pattern", c -> c.putObject("alpha_pattern").put("q_proj", 2)),
                refused("use_dora", c -> c.put("use_dora", true)),
                refused("peft_type IA3", c -> c.put("peft_type", "IA3")),
                refused("regular expression", c -> c.put("target_modules", ".*q_proj")),
                refused("'embed_tokens'", c -> c.putArray("target_modules").add("q_proj").add("embed_tokens")),
                refused("'qkv_proj'", c -> c.putArray("target_modules").add("qkv_proj")),
                refused("target_modules is not set", c -> c.remove("target_modules")));
    }

    private static Arguments refused(String message, Consumer<ObjectNode> edit) {
        return Arguments.of(message, edit);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("refusedConfigs")
    void whatIsNotPlainLoraIsRefusedByName(String message, Consumer<ObjectNode> edit) throws IOException {
        RandomPeftAdapters.write(dir, MODEL, new RandomPeftAdapters.Spec("odd", 4, 8, false, List.of("q_proj")), 1);
        editConfig("odd", edit);
        assertThatThrownBy(() -> PeftAdapters.open(dir, MODEL)).isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("odd").hasMessageContaining(message);
    }

    @Test
    void tensorsMustMatchTheTargetsAndTheModel() throws IOException {
        RandomPeftAdapters.write(dir, MODEL, new RandomPeftAdapters.Spec("v", 4, 8, false, List.of("v_proj")), 1);
        editConfig("v", c -> c.putArray("target_modules").add("v_proj").add("o_proj"));
        assertThatThrownBy(() -> PeftAdapters.open(dir, MODEL)).isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("adapter 'v'").hasMessageContaining("o_proj of layer 0 lacks its lora_A");

        editConfig("v", c -> c.put("r", 8));
        assertThatThrownBy(() -> PeftAdapters.open(dir, MODEL)).isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("is [4, 32], expected [8, 32] (r = 8)");

        editConfig("v", c -> {
            c.put("r", 4);
            c.putArray("target_modules").add("q_proj");
        });
        assertThatThrownBy(() -> PeftAdapters.open(dir, MODEL)).isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("self_attn.v_proj.lora_A.weight is not the lora_A or lora_B of a targeted module");
        // a model of one layer: the adapter's second layer is too many
        ModelConfig shallow = MODEL.toBuilder().numLayers(1).build();
        editConfig("v", c -> c.putArray("target_modules").add("v_proj"));
        assertThatThrownBy(() -> PeftAdapters.open(dir, shallow)).isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("layers.1.");
    }

    @Test
    void anAdapterWithoutSafetensorsIsRefused() throws IOException {
        RandomPeftAdapters.write(dir, MODEL, new RandomPeftAdapters.Spec("pickled", 4, 8, false, List.of("q_proj")), 1);
        Files.move(dir.resolve("pickled").resolve(PeftAdapters.WEIGHTS_FILE),
                dir.resolve("pickled").resolve("adapter_model.bin"));
        assertThatThrownBy(() -> PeftAdapters.open(dir, MODEL)).isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("adapter 'pickled'").hasMessageContaining("adapter_model.bin, a pickle");
    }

    private void editConfig(String adapter, Consumer<ObjectNode> edit) throws IOException {
        Path file = dir.resolve(adapter).resolve(PeftAdapterConfig.FILE_NAME);
        ObjectNode config = (ObjectNode) JSON.readTree(file.toFile());
        edit.accept(config);
        JSON.writeValue(file.toFile(), config);
    }
}
