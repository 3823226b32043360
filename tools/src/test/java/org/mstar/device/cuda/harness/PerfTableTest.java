package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.ModelConfig;

/** The one-call table's engine side on the CPU with a tiny geometry: every kind of row, with its bytes and FLOPs. */
class PerfTableTest {
    private static final ModelConfig TINY = DecodeBench.llama32_1b().toBuilder()
            .hiddenSize(64).intermediateSize(128).numLayers(2).numHeads(4).numKvHeads(2).headDim(16).vocabSize(512)
            .bosTokenId(0).eosTokenId(1).build();

    @Test
    void measuresPrefillDecodeAndMixedRows() {
        var geometry = new PerfTable.Geometry("tiny", TINY, new int[][] {{40, 3}},
                List.of(new DecodeBench.Case(2, 30, true)), List.of(new MixedBench.Case(3, 20, 100, 32)));
        try (CpuDevice cpu = new CpuDevice(2)) {
            List<String> lines = PerfTable.measure(cpu, 1, List.of(geometry)).lines().toList();

            assertThat(lines.get(0)).isEqualTo(PerfTable.HEADER);
            assertThat(lines).hasSize(4);
            assertThat(lines.subList(1, 4)).extracting(l -> l.split("\t")[0]).containsExactly("prefill", "decode", "mixed");
            assertThat(lines.subList(1, 4)).allSatisfy(l -> {
                String[] cells = l.split("\t");
                assertThat(cells).hasSize(PerfTable.HEADER.split("\t").length);
                assertThat(Double.parseDouble(cells[7])).as("engine ms").isPositive();
            });
            String[] mixed = lines.get(3).split("\t");
            // 100 prompt tokens in chunks of 32: four steps, each with the three decode rows
            assertThat(Double.parseDouble(mixed[8])).as("tokens per step").isCloseTo(3 + 100 / 4.0, within(1e-9));
        }
    }

    @Test
    void mixedStepsCarryEveryDecodeRowAndOneChunk() {
        try (CpuDevice cpu = new CpuDevice(2)) {
            MixedBench.Row row = new MixedBench(cpu, 3).run("tiny", TINY, List.of(new MixedBench.Case(4, 24, 70, 16)))
                    .get(0);

            assertThat(row.steps()).isEqualTo(5); // ceil(70 / 16)
            assertThat(row.meanDecodeKeys()).isGreaterThan(24);
            assertThat(MixedBench.table(List.of(row)).lines()).hasSize(3);
        }
    }

    @Test
    void boundsCountEveryWeightAndEveryAttendedKey() {
        ModelConfig c = TINY;
        double layer = 64.0 * (4 + 2 * 2) * 16 + 4 * 16 * 64 + 3 * 64 * 128;
        assertThat(PerfTable.weightBytes(c, 10)).isEqualTo((2 * layer + 512 * 64) * 2);
        assertThat(PerfTable.kvBytesPerToken(c)).isEqualTo(2.0 * 2 * 2 * 16 * 2);
        assertThat(PerfTable.flops(c, 10, 1, 100)).isEqualTo(2 * 2 * layer * 10 + 2.0 * 512 * 64 + 4.0 * 2 * 4 * 16 * 100);
    }

    @Test
    void aMixtureOfExpertsDecodeRowReadsOnlyItsRowsExperts() {
        ModelConfig c = MoePerf.qwen3_30b_a3b(48);
        DecodeBench.Row row = new DecodeBench.Row("q", new DecodeBench.Case(1, 512, true), 10, 0, 1000, -1, -1);
        // per layer: q/k/v/o, the router and the one row's 8 experts; then the LM head
        double layer = 2048.0 * (32 + 8) * 128 + 32 * 128 * 2048 + 2048 * 128 + 8 * 3.0 * 2048 * 768;
        double bytes = (48 * layer + 151_936.0 * 2048) * 2;

        assertThat(PerfTable.decodeLines("q", c, List.of(row)).get(0).bytes()).isCloseTo(bytes + 1000, within(1.0));
        assertThat(bytes).isLessThan(PerfTable.weightBytes(c, Double.POSITIVE_INFINITY) / 8);
    }
}
