package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.ModelConfig;
import org.mstar.model.lora.PeftAdapters;

/** The LoRA decode table's measuring loop, on the CPU with a tiny geometry: every row is filled in and compared. */
class LoraBenchTest {
    @Test
    void measuresTheBaseModelAndEachAdapterCount(@TempDir Path dir) throws Exception {
        ModelConfig tiny = DecodeBench.llama32_1b().toBuilder()
                .hiddenSize(64).intermediateSize(128).numLayers(2).numHeads(4).numKvHeads(2).headDim(16).vocabSize(512)
                .bosTokenId(0).eosTokenId(1).build();
        Path adapters = dir.resolve("adapters");
        try (CpuDevice cpu = new CpuDevice(2)) {
            List<LoraBench.Row> rows = new LoraBench(cpu, 1).run(tiny, 4, 40, new int[] {0, 2, 4},
                    new boolean[] {true, false}, adapters);

            assertThat(rows).extracting(LoraBench.Row::served, LoraBench.Row::adapters, LoraBench.Row::graphs)
                    .containsExactly(
                            tuple(false, 0, true),
                            tuple(true, 0, true),
                            tuple(true, 2, true),
                            tuple(true, 4, true),
                            tuple(false, 0, false),
                            tuple(true, 0, false),
                            tuple(true, 2, false),
                            tuple(true, 4, false));
            assertThat(rows).allSatisfy(r -> assertThat(r.millisPerStep()).isPositive());
            // every adapter is loaded once into its own slot, by the first case that names it
            assertThat(rows).extracting(LoraBench.Row::loads).containsExactly(0L, 0L, 2L, 2L, 0L, 0L, 2L, 2L);
            List<String> lines = LoraBench.table(rows).lines().toList();
            assertThat(lines).hasSize(10);
            assertThat(lines.get(0)).contains("| × base | target ≥ 0.90× |");
            assertThat(lines.get(2)).startsWith("| without adapters | 0 | 4 | 40 | on |").contains("| 1.000 | - |");
            assertThat(lines.get(4)).startsWith("| with adapters | 2 | 4 | 40 | on |").containsPattern("\\| (met|missed) \\|");
        }
        // one weights file, linked by the others, each with its own config
        assertThat(Files.isSymbolicLink(adapters.resolve("bench-4").resolve(PeftAdapters.WEIGHTS_FILE))).isTrue();
        assertThat(PeftAdapters.open(adapters, tiny).names()).containsExactly("bench-1", "bench-2", "bench-3", "bench-4");
    }
}
