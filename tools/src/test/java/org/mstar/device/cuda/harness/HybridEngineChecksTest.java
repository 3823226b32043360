package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.mstar.device.cpu.CpuDevice;

/**
 * The harness's Mamba2 and Bamba engine checks run without a GPU when the candidate is a second CPU device: fp32 and
 * decode graphs must then agree exactly and the CPU's own bf16 path must stay within the bf16 tolerance.
 */
class HybridEngineChecksTest {
    @Test
    void cpuCandidatePassesEveryCheck() {
        try (CpuDevice reference = new CpuDevice(2); CpuDevice candidate = new CpuDevice(2)) {
            List<CheckResult> results = new HybridEngineChecks(reference, candidate, 5).run();

            assertThat(results).hasSize(10).allSatisfy(r -> assertThat(r.passed()).as(r.toString()).isTrue());
            for (int model = 0; model < 2; model++) {
                List<CheckResult> rows = results.subList(5 * model, 5 * model + 5);
                assertThat(rows.get(0).error()).isZero();
                assertThat(rows.get(1).error()).isZero();
                assertThat(rows.get(3).error()).isZero();
                assertThat(rows.get(4).error()).isZero();
            }
        }
    }
}
