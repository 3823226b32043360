package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.apache.flink.configuration.Configuration;
import org.junit.jupiter.api.Test;
import org.mstar.engine.EngineRole;

/** Prefill and decode engines on one GPU size their KV pools to half the room each; on two GPUs, each to all of it. */
class DisaggregatedSidesShareAGpuTest {
    private static int enginesPerDevice(Map<String, String> options, EngineRole role) {
        Configuration side = DisaggregatedStages.side(Configuration.fromMap(options),
                role == EngineRole.PREFILL ? DisaggregationOptions.PREFILL_DEVICE : DisaggregationOptions.DECODE_DEVICE,
                role);
        return side.get(LlamaEngineOptions.ENGINES_PER_DEVICE);
    }

    @Test
    void bothSidesOnOneGpuSplitIt() {
        Map<String, String> oneGpu = Map.of("mstar.engine.device", "cuda:0");
        assertThat(enginesPerDevice(oneGpu, EngineRole.PREFILL)).isEqualTo(2);
        assertThat(enginesPerDevice(oneGpu, EngineRole.DECODE)).isEqualTo(2);
    }

    @Test
    void sidesOnTheirOwnGpusOrTheCpuDoNot() {
        Map<String, String> twoGpus = Map.of("mstar.engine.device", "cuda:0",
                "mstar.disaggregation.decode.device", "cuda:1");
        assertThat(enginesPerDevice(twoGpus, EngineRole.PREFILL)).isEqualTo(1);
        assertThat(enginesPerDevice(twoGpus, EngineRole.DECODE)).isEqualTo(1);
        assertThat(enginesPerDevice(Map.of("mstar.engine.device", "cpu"), EngineRole.DECODE)).isEqualTo(1);
    }

    @Test
    void aSetValueWins() {
        assertThat(enginesPerDevice(Map.of("mstar.engine.device", "cuda:0", "mstar.engine.engines-per-device", "3"),
                EngineRole.PREFILL)).isEqualTo(3);
    }
}
