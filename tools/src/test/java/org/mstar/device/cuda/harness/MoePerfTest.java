package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.List;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.mstar.device.MoeRouting;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelCost;
import org.mstar.model.MoeConfig;

/** The --moe-perf geometries and engine rows, on the CPU with a tiny mixture of experts. */
class MoePerfTest {
    /** How torch_moe.py reads a row's model and layer count back. */
    private static final Pattern NAME = Pattern.compile("(\\S+) \\((\\d+) layers\\)");

    @Test
    void theGeometriesHoldThePublishedModelsParameters() {
        List<PerfTable.Geometry> published = MoePerf.geometries(0);
        ModelConfig qwen3 = published.get(0).config();
        ModelConfig deepseek = published.get(1).config();
        // ModelCost counts every weight but the input embedding (and no norms): add the embedding back
        double qwen3Params = ModelCost.weightBytes(qwen3) / 2 + 151_936.0 * 2048;
        double deepseekParams = ModelCost.weightBytes(deepseek) / 2 + 102_400.0 * 2048;

        assertThat(qwen3.numLayers()).isEqualTo(48);
        assertThat(deepseek.numLayers()).isEqualTo(27);
        assertThat(qwen3Params / 1e9).isCloseTo(30.5, within(0.2));
        assertThat(deepseekParams / 1e9).isCloseTo(15.7, within(0.2));
        assertThat(published).extracting(PerfTable.Geometry::name)
                .containsExactly("Qwen3-30B-A3B (48 layers)", "DeepSeek-V2-Lite (27 layers)")
                .allSatisfy(n -> assertThat(NAME.matcher(n).matches()).isTrue());
    }

    @Test
    void engineLayersCutBothGeometriesKeepingDeepseeksDenseFirstLayer() {
        List<PerfTable.Geometry> cut = MoePerf.geometries(4);
        assertThat(cut).extracting(g -> g.config().numLayers()).containsExactly(4, 4);
        MoeConfig deepseek = cut.get(1).config().moe().orElseThrow();
        assertThat(List.of(deepseek.sparse(0), deepseek.sparse(1), deepseek.sparse(3))).containsExactly(false, true, true);
        assertThat(cut.get(0).name()).isEqualTo("Qwen3-30B-A3B (4 layers)");
    }

    @Test
    void measuresPrefillAndDecodeRowsOfAMixtureOfExperts() {
        ModelConfig tiny = MoePerf.qwen3_30b_a3b(2).toBuilder().hiddenSize(64).numHeads(4).numKvHeads(2).headDim(16)
                .vocabSize(512).bosTokenId(0).eosTokenId(1)
                .moe(new MoeConfig(8, 32, MoeRouting.softmaxTopK(2, true), List.of(true, true))).build();
        var geometry = new PerfTable.Geometry("tiny (2 layers)", tiny, new int[][] {{40, 1}},
                List.of(new DecodeBench.Case(1, 30, true), new DecodeBench.Case(6, 30, true)), List.of());
        try (CpuDevice cpu = new CpuDevice(2)) {
            List<String[]> rows = MoePerf.measure(cpu, 1, List.of(geometry)).lines().skip(1)
                    .map(l -> l.split("\t")).toList();

            assertThat(rows).extracting(r -> r[0]).containsExactly("prefill", "decode", "decode");
            assertThat(rows).allSatisfy(r -> assertThat(Double.parseDouble(r[7])).as("engine ms").isPositive());
            // less the weights its batch reads (ModelCost.weightBytesRead), a decode row's bytes are its K/V: the
            // same per request at both batches, so the rows must count each batch's own experts
            double kv1 = kvBytes(tiny, rows.get(1));
            double kv6 = kvBytes(tiny, rows.get(2));
            assertThat(kv1).isPositive();
            assertThat(kv6 / kv1).isCloseTo(6, within(0.6));
        }
    }

    /** A decode line's K/V bytes: its bytes less the weights its batch reads. */
    private static double kvBytes(ModelConfig c, String[] row) {
        return Double.parseDouble(row[9]) - ModelCost.weightBytesRead(c, Integer.parseInt(row[2]));
    }
}
