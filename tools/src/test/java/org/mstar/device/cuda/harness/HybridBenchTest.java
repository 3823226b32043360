package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;
import org.mstar.device.Mamba2Shape;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.HybridConfig;

/** The hybrid bench's geometry, work count and measuring loop (on the CPU with a tiny Bamba): no GPU needed. */
class HybridBenchTest {
    @Test
    void bamba9bHasItsPublishedShape() {
        HybridConfig c = HybridBench.bamba9b(32);
        assertThat(c.attentionLayers()).containsExactly(9, 18, 27);
        assertThat(c.mambaLayers()).hasSize(29);
        assertThat(c.mixer().inner()).isEqualTo(8192);
        assertThat(c.mixer().projWidth()).isEqualTo(8192 + 8192 + 2 * 128 + 128);
        assertThat(c.attentionHeadDim()).isEqualTo(128);
        assertThat(HybridBench.bamba9b(12).attentionLayers()).containsExactly(9);
    }

    @Test
    void prefillWorkCountsTheProjectionsTheLastLogitsAndCausalAttention() {
        HybridConfig c = HybridBench.bamba9b(32);
        double mamba = 4096.0 * 16_768 + 8192.0 * 4096;
        double attention = 4096.0 * (4096 + 2 * 1024) + 4096.0 * 4096;
        double mlp = 3 * 4096.0 * 14_336;
        double params = 29 * (mamba + mlp) + 3 * (attention + mlp);
        // 8.73 B parameters in the projections: Bamba-9B's 9.78 B less the embedding and the LM head
        assertThat(params / 1e9).isCloseTo(8.73, within(0.01));
        int tokens = 2048;
        double want = 2 * params * tokens + 2.0 * 4096 * 128_256 + 3 * 4.0 * 4096 * (tokens * (tokens + 1.0) / 2);
        assertThat(HybridBench.prefillFlops(c, tokens)).isCloseTo(want, within(want * 1e-12));
    }

    @Test
    void measuresDecodeAtEachBatchAndThePrefill() {
        HybridConfig tiny = tinyBamba();
        List<HybridBench.DecodeRow> decode = new ArrayList<>();
        List<HybridBench.PrefillRow> prefill = new ArrayList<>();
        try (CpuDevice cpu = new CpuDevice(2)) {
            new HybridBench(cpu, 1).run(tiny, new int[] {1, 3}, decode, prefill);
        }
        assertThat(decode).extracting(HybridBench.DecodeRow::batch).containsExactly(1, 3);
        assertThat(decode).allSatisfy(r -> {
            assertThat(r.millisPerStep()).isPositive();
            assertThat(r.weightBytes()).isPositive();
            assertThat(r.kvBytes()).isPositive();
        });
        // two mixer layers, each (4 x 16 x 16 SSM + 96 x 3 conv) fp32 values, read and written, per row
        assertThat(decode.get(1).stateBytes()).isEqualTo(3L * 2 * 2 * (4 * 16 * 16 + 96 * 3) * 4);
        assertThat(prefill).singleElement().satisfies(r -> {
            assertThat(r.tokens()).isEqualTo(HybridBench.PREFILL_TOKENS);
            assertThat(r.millis()).isPositive();
        });
        assertThat(HybridBench.decodeTable(decode, 3.0).lines()).hasSize(4);
        assertThat(HybridBench.prefillTable(prefill, 500).lines()).hasSize(3);
    }

    /** Three layers, the middle one attention; mixers of 4 heads of 16, state 16. */
    private static HybridConfig tinyBamba() {
        Mamba2Shape mixer = new Mamba2Shape(4, 16, 1, 16, 4, 64, 0f, Float.POSITIVE_INFINITY);
        return new HybridConfig(HybridConfig.Family.BAMBA, 64, 3, 512, 1e-5, false, OptionalInt.empty(),
                List.of(), mixer, true, List.of(1), 4, 2, 8, 10_000, 128, 4096);
    }

    @Test
    void decodesAloneForAProfilerWithTheSameStateBytes() {
        HybridConfig tiny = tinyBamba();
        HybridBench.DecodeRow row;
        try (CpuDevice cpu = new CpuDevice(2)) {
            row = new HybridBench(cpu, 1).decodeOnly(tiny, 3);
        }
        assertThat(row.batch()).isEqualTo(3);
        assertThat(row.millisPerStep()).isPositive();
        assertThat(row.stateBytes()).isEqualTo(3L * 2 * 2 * (4 * 16 * 16 + 96 * 3) * 4);
    }
}
