package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.ModelConfig;

/** The throughput section's measuring loop, on the CPU with a tiny geometry: every row is filled in. */
class EngineBenchTest {
    @Test
    void measuresEveryBatchAtEveryLayerCount() {
        ModelConfig tiny = EngineBench.llama3_8b().toBuilder()
                .hiddenSize(64).intermediateSize(128).numHeads(4).numKvHeads(2).headDim(16).vocabSize(512)
                .bosTokenId(0).eosTokenId(1).build();
        try (CpuDevice cpu = new CpuDevice(2)) {
            List<EngineBench.Row> rows = new EngineBench(cpu, 1).run(tiny, new int[] {1, 2}, new int[] {1, 3});

            // per layer count: eager, then decode graphs
            assertThat(rows).extracting(EngineBench.Row::layers).containsExactly(1, 1, 1, 1, 2, 2, 2, 2);
            assertThat(rows).extracting(EngineBench.Row::batch).containsExactly(1, 3, 1, 3, 1, 3, 1, 3);
            assertThat(rows).extracting(EngineBench.Row::graphs)
                    .containsExactly(false, false, true, true, false, false, true, true);
            assertThat(rows).allSatisfy(r -> {
                assertThat(r.prefillSteps()).isPositive();
                assertThat(r.decodeMillisPerStep()).isPositive();
                assertThat(r.streamedBytes()).isPositive();
            });
            String fit = EngineBench.extrapolation(rows, 32, 4.3);
            assertThat(fit.lines()).hasSize(4); // header, rule, one line per batch
        }
    }
}
