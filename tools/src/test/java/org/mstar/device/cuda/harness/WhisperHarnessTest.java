package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.whisper.WhisperConfig;

/**
 * The Whisper harness's checks and bench, on the CPU: fp32 meets transformers, decode graphs meet eager, and every
 * bench row is filled in.
 */
class WhisperHarnessTest {
    /** The tiny checkpoint the operators module's tests use. */
    private static final Path FIXTURE = Path.of("../flink-mstar-operators/src/test/resources/org/mstar/model/fixtures/whisper");

    @Test
    void fp32ChecksMatchTransformersOnTheCpu() throws Exception {
        try (CpuDevice cpu = new CpuDevice(2)) {
            List<WhisperChecks.Row> rows = new WhisperChecks(FIXTURE).run(cpu, DType.F32);
            assertThat(rows).hasSize(2 + 4);
            assertThat(rows).allSatisfy(r -> assertThat(r.relError()).as(r.what()).isLessThan(1e-5));
            assertThat(rows.subList(2, rows.size())).allSatisfy(r -> assertThat(r.tokens()).startsWith("identical"));
            assertThat(WhisperChecks.table("quantity", rows).lines()).hasSize(2 + rows.size());
        }
    }

    /** On the CPU a replay re-runs the recorded forward, from the buffers the resources plan into. */
    @Test
    void decodeGraphsMeetEagerOnTheCpu() throws Exception {
        try (CpuDevice cpu = new CpuDevice(2)) {
            List<WhisperChecks.Row> rows = new WhisperChecks(FIXTURE).graphsAgainstEager(cpu, DType.F32);
            assertThat(rows).hasSize(4);
            assertThat(rows).allSatisfy(r -> {
                assertThat(r.relError()).as(r.what()).isLessThanOrEqualTo(EngineChecks.GRAPHS_TOLERANCE);
                assertThat(r.tokens()).as(r.what()).startsWith("identical");
            });
        }
    }

    @Test
    void benchMeasuresEveryBatch() throws Exception {
        WhisperConfig tiny = WhisperConfig.load(FIXTURE);
        try (CpuDevice cpu = new CpuDevice(2)) {
            List<WhisperBench.Row> rows = new WhisperBench(cpu, 1, 4).run("tiny", tiny, new int[] {1, 2}, new int[] {2});
            assertThat(rows).extracting(WhisperBench.Row::batch).containsExactly(1, 2, 2);
            assertThat(rows).extracting(WhisperBench.Row::graphs).containsExactly(false, false, true);
            assertThat(rows).allSatisfy(r -> {
                assertThat(r.encodeStepMillis()).isPositive();
                assertThat(r.decodeMillisPerStep()).isPositive();
                assertThat(r.hostMillisPerStep() + r.waitMillisPerStep()).isPositive()
                        .isLessThanOrEqualTo(r.decodeMillisPerStep() * 1.01);
                assertThat(r.boundBytes()).isPositive();
            });
            assertThat(WhisperBench.table(rows, 4.3).lines()).hasSize(5);
        }
    }

    @Test
    void benchmarkGeometriesLayOutWhispersTokens() {
        WhisperConfig small = WhisperConfig.small();
        assertThat(small.noTimestampsTokenId()).isEqualTo(50363);
        assertThat(small.timestampBegin() + 1501).isEqualTo(small.vocabSize());
        WhisperConfig large = WhisperConfig.largeV3();
        assertThat(large.noTimestampsTokenId()).isEqualTo(50364);
        assertThat(large.timestampBegin() + 1501).isEqualTo(large.vocabSize());
        assertThat(large.langToId()).hasSize(100);
    }
}
