package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.cpu.CpuDevice;

/**
 * The harness's engine-with-adapters rows run without a GPU when the candidate is a second CPU device: fp32 and the
 * decode graphs then agree exactly, the CPU's own bf16 path stays within the bf16 band, and the adapters visibly change
 * the logits.
 */
class LoraChecksTest {
    @Test
    void cpuCandidatePassesEveryCheck(@TempDir Path dir) throws Exception {
        try (CpuDevice reference = new CpuDevice(2); CpuDevice candidate = new CpuDevice(2)) {
            LoraChecks checks = new LoraChecks(reference, candidate, EngineChecksTest.small(), 3);
            List<CheckResult> results = checks.run(dir);

            assertThat(results).hasSize(5).allSatisfy(r -> assertThat(r.passed()).as(r.toString()).isTrue());
            assertThat(results.get(1).error()).isZero();
            assertThat(results.get(4).error()).isZero();
            assertThat(checks.notes()).contains("fp32 192 of 192 tokens equal").doesNotContain(": 0 decode steps replayed");
            // the smallest first-token distance of an adapter row from the base model's lies well outside the bf16 band
            double effect = Double.parseDouble(checks.notes().replaceAll("(?s).*first logits lie (\\S+) .*", "$1"));
            assertThat(effect).isGreaterThan(EngineChecks.BF16_TOLERANCE);
        }
    }
}
