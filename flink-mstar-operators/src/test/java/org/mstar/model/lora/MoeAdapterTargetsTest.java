package org.mstar.model.lora;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.MoeRouting;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelFormatException;
import org.mstar.model.MoeConfig;

/** Adapters of a mixture of experts apply to its attention projections only; an MLP module is refused by name. */
class MoeAdapterTargetsTest {
    private static final ModelConfig QWEN3_MOE = ModelConfig.builder(Architecture.QWEN3_MOE).hiddenSize(32)
            .intermediateSize(48).numLayers(2).numHeads(4).numKvHeads(2).headDim(8).maxPositionEmbeddings(64)
            .vocabSize(64).moe(new MoeConfig(4, 16, MoeRouting.softmaxTopK(2, true), List.of(true, false))).build();

    @TempDir
    Path dir;

    private PeftAdapterConfig read(String targets) throws IOException {
        Files.writeString(dir.resolve(PeftAdapterConfig.FILE_NAME),
                "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 8, \"target_modules\": " + targets + "}");
        return PeftAdapterConfig.read(dir, QWEN3_MOE);
    }

    @Test
    void allLinearMeansTheAttentionProjections() throws IOException {
        assertThat(read("\"all-linear\"").targets()).containsExactlyInAnyOrder(LoraModule.Q_PROJ, LoraModule.K_PROJ,
                LoraModule.V_PROJ, LoraModule.O_PROJ);
    }

    @Test
    void anMlpModuleIsRefusedByName() {
        assertThatThrownBy(() -> read("[\"q_proj\", \"gate_proj\"]")).isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("'gate_proj'").hasMessageContaining("Qwen3MoeForCausalLM");
    }
}
