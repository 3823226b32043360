package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.ModelConfig;

/** The engine decode table's measuring loop, on the CPU with a tiny geometry: every row is filled in. */
class DecodeBenchTest {
    @Test
    void measuresEveryCaseWithAndWithoutGraphs() {
        ModelConfig tiny = DecodeBench.llama32_1b().toBuilder()
                .hiddenSize(64).intermediateSize(128).numLayers(2).numHeads(4).numKvHeads(2).headDim(16).vocabSize(512)
                .bosTokenId(0).eosTokenId(1).build();
        List<DecodeBench.Case> cases = List.of(new DecodeBench.Case(3, 40, true), new DecodeBench.Case(2, 70, true),
                new DecodeBench.Case(3, 40, false), new DecodeBench.Case(3, 40, true, 0));
        try (CpuDevice cpu = new CpuDevice(2)) {
            List<DecodeBench.Row> rows = new DecodeBench(cpu, 1).run("tiny", tiny, cases);

            assertThat(rows).extracting(DecodeBench.Row::c).containsExactlyElementsOf(cases);
            assertThat(rows).allSatisfy(r -> {
                assertThat(r.millisPerStep()).isPositive();
                assertThat(r.weightBytes()).isPositive();
                assertThat(r.kvBytes()).isPositive();
            });
            // 3 rows pad to bucket 4, recorded by the first case; 2 rows to bucket 2, recorded by the second
            assertThat(rows.get(0).graphBytes()).isPositive();
            assertThat(rows.get(1).graphBytes()).isPositive();
            assertThat(rows.get(2).graphBytes()).as("eager").isEqualTo(-1);
            // its own engine, so it records bucket 4 again
            assertThat(rows.get(3).graphBytes()).as("another matmul setting").isPositive();
            List<String> lines = DecodeBench.table(rows, 4.0).lines().toList();
            assertThat(lines).hasSize(6); // header, rule, one line per row
            assertThat(lines.get(5)).contains("| on, cuBLAS only |");
        }
    }
}
