package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.ModelConfig;

/** The engine prefill table's measuring loop, on the CPU with a tiny geometry: every row is filled in. */
class PrefillBenchTest {
    @Test
    void measuresEveryCaseWithBothKernels() {
        ModelConfig tiny = EngineBench.llama3_8b().toBuilder()
                .hiddenSize(64).intermediateSize(128).numHeads(4).numKvHeads(2).headDim(16).vocabSize(512)
                .bosTokenId(0).eosTokenId(1).build();
        try (CpuDevice cpu = new CpuDevice(2)) {
            List<PrefillBench.Row> rows = new PrefillBench(cpu, 1).run(tiny, 2, new int[][] {{40, 3}, {100, 1}});

            assertThat(rows).extracting(PrefillBench.Row::prompt).containsExactly(40, 40, 100, 100);
            assertThat(rows).extracting(PrefillBench.Row::batch).containsExactly(3, 3, 1, 1);
            assertThat(rows).extracting(PrefillBench.Row::tensorCores).containsExactly(true, false, true, false);
            assertThat(rows).allSatisfy(r -> {
                assertThat(r.steps()).isPositive();
                assertThat(r.tokensPerSecond()).isPositive();
            });
            assertThat(PrefillBench.table(rows).lines()).hasSize(6); // header, rule, one line per row
        }
    }
}
