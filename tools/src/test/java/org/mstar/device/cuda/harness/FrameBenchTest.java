package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.frame.FrameModelConfig;
import org.mstar.resources.RingKVLayerConfig;

/** The frame throughput section's loop, on the CPU with a tiny geometry: a row per session count, all filled in. */
class FrameBenchTest {
    @Test
    void measuresEverySessionCount() {
        FrameModelConfig tiny = new FrameModelConfig(64, 32, 4, 2, 8, 64, 128, 4, 1e-5, 10000,
                List.of(new RingKVLayerConfig(2, 2, 1), new RingKVLayerConfig(2, 1, 2)));
        try (CpuDevice cpu = new CpuDevice(2)) {
            List<FrameBench.Row> rows = new FrameBench(cpu, 1).run(tiny, new int[] {1, 3});
            assertThat(rows).extracting(FrameBench.Row::sessions).containsExactly(1, 3);
            assertThat(rows).allSatisfy(r -> {
                assertThat(r.msPerStep()).isPositive();
                assertThat(r.tokensPerSecond()).isEqualTo(r.framesPerSecond() * 128, org.assertj.core.data.Offset.offset(1e-6));
            });
            assertThat(FrameBench.table(rows).lines()).hasSize(4);
        }
    }
}
