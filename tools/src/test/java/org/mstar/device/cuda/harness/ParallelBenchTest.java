package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.ShardLayout;

/**
 * The tensor-parallel table's measuring loop, on CPU devices with a tiny geometry: one device, then two, every row
 * filled in, the bound halved over two devices; and the options it is asked through.
 */
class ParallelBenchTest {
    @Test
    void measuresOneDeviceThenTheGroup() {
        ModelConfig tiny = EngineBench.llama3_8b().toBuilder().numLayers(2)
                .hiddenSize(64).intermediateSize(128).numHeads(4).numKvHeads(2).headDim(16).vocabSize(512)
                .bosTokenId(0).eosTokenId(1).build();
        List<ParallelBench.Row> rows = new ParallelBench("cpu", 1, 24, new int[] {1, 3}).run("tiny", tiny, 2);

        assertThat(rows).extracting(ParallelBench.Row::degree).containsExactly(1, 1, 2, 2);
        assertThat(rows).extracting(ParallelBench.Row::batch).containsExactly(1, 3, 1, 3);
        assertThat(rows).allSatisfy(r -> {
            assertThat(r.decodeMillis()).isPositive();
            assertThat(r.prefillTokensPerSecond()).isPositive();
        });
        assertThat(rows.get(2).boundMillis(1)).isCloseTo(rows.get(0).boundMillis(1) / 2, offset(1e-12));
        assertThat(ParallelBench.table(rows, 3.35).lines()).hasSize(6);
    }

    @Test
    void parallelPerfNamesGeometriesAndADegree() {
        GpuHarnessOptions options = new GpuHarnessOptions();
        HarnessCommandLine.parse(options, "--parallel-perf", "8B,70B,moe", "--tensor-parallel", "4");
        assertThat(options.parallelGeometries()).containsExactly("8B", "70B", "moe");
        assertThat(options.tensorParallel).isEqualTo(4);
        assertThat(options.replacesTables()).isTrue();
        assertThatThrownBy(() -> HarnessCommandLine.parse(new GpuHarnessOptions(), "--parallel-perf", "13B"))
                .hasMessage("unknown --parallel-perf geometry '13B': 8B, 70B or moe");
        assertThatThrownBy(() -> HarnessCommandLine.parse(new GpuHarnessOptions(), "--parallel-perf", "8B",
                "--tensor-parallel", "1"))
                .hasMessage("--parallel-perf compares one GPU with --tensor-parallel N >= 2, got 1");
    }

    /** The Llama geometries split over 2, 4 and 8 GPUs; Qwen3-30B-A3B's 4 key-value heads over 2 and 4 only. */
    @Test
    void theGeometriesSplitAsTheirKeyValueHeadsAllow() {
        for (ParallelBench.Geometry g : ParallelBench.Geometry.values()) {
            ModelConfig c = g.config(g.layers);
            for (int degree : new int[] {2, 4}) {
                assertThat(ShardLayout.of(c, degree).degree()).isEqualTo(degree);
            }
        }
        assertThat(ShardLayout.of(ParallelBench.Geometry.LLAMA_70B.config(16), 8).kvHeads()).isEqualTo(1);
        assertThatThrownBy(() -> ShardLayout.of(ParallelBench.Geometry.QWEN3_MOE.config(16), 8))
                .hasMessage("tensor parallel 8 does not divide the 4 key-value heads (num_key_value_heads) of "
                        + "Qwen3MoeForCausalLM");
    }
}
