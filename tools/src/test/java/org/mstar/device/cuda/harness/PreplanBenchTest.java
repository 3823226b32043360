package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.mstar.engine.PreplanCounts;
import org.mstar.engine.StepTimings.Phase;

/** The pre-plan table (the measuring needs a GPU: CUDA events): one line per row, each phase in its column. */
class PreplanBenchTest {
    @Test
    void tableHasOneLinePerRowWithThePhasesInOrder() {
        Map<Phase, Double> host = new EnumMap<>(Phase.class);
        for (Phase p : Phase.values()) {
            host.put(p, 0.1 * (p.ordinal() + 1));
        }
        List<PreplanBench.Row> rows = List.of(
                new PreplanBench.Row("1B", 64, PreplanBench.Setting.OFF, 5.0, host, 0.9, 4.0, 4.2, PreplanCounts.NONE,
                        0, new PreplanBench.GcPauses(0, 0)),
                new PreplanBench.Row("1B", 64, PreplanBench.Setting.PREPLAN, 4.5, host, 0.4, 4.1, 4.3,
                        new PreplanCounts(24, 24, 0), 0, new PreplanBench.GcPauses(1, 5)),
                new PreplanBench.Row("1B", 64, PreplanBench.Setting.LAUNCH_AHEAD, 4.2, host, Double.NaN, Double.NaN,
                        Double.NaN, new PreplanCounts(24, 24, 0), 24, new PreplanBench.GcPauses(0, 0)));

        List<String> lines = PreplanBench.table(rows).lines().toList();

        assertThat(lines.get(2)).isEqualTo("| 1B | 64 | off | 5.000 | 0.100 | 0.200 | 0.300 | 0.400 | 0.500 | 0.600 "
                + "| 0.700 | 2.200 | 4.000 | 4.200 | 0.900 | 0 / 0 / 0 | 0 | 0, 0 |");
        assertThat(lines.get(3)).startsWith("| 1B | 64 | on | 4.500 |").endsWith("| 0.400 | 24 / 24 / 0 | 0 | 1, 5 |");
        assertThat(lines.get(4)).startsWith("| 1B | 64 | on, launched ahead | 4.200 |")
                .endsWith("| 2.200 | - | - | - | 24 / 24 / 0 | 24 | 0, 0 |");
        assertThat(lines.get(0).split("\\|")).hasSameSizeAs(lines.get(2).split("\\|"));
        assertThat(lines.get(1).split("\\|")).hasSameSizeAs(lines.get(2).split("\\|"));
    }
}
