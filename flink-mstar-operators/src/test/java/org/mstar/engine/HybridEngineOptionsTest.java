package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.mamba.StateSnapshots;

/**
 * What a Mamba2 or Bamba engine refuses, by name, rather than serve wrongly: host offload of KV (a preempted request
 * is recomputed), a recurrent state handed off between engines, and snapshots of states for the prefix cache that
 * the pool could not keep.
 */
class HybridEngineOptionsTest {
    private static CpuDevice cpu;

    @BeforeAll
    static void start() {
        cpu = new CpuDevice(1);
    }

    @AfterAll
    static void stop() {
        cpu.close();
    }

    private static KvCacheOptions.Builder kv() {
        return KvCacheOptions.builder().maxSeqLen(256).maxNumPages(64).pageSize(4).prefixCache(false);
    }

    @Test
    void hostOffloadIsRefused() {
        assertThatThrownBy(() -> HybridEngineLoader.load(TransformersFidelityTest.folder("bamba"), cpu,
                new EngineOptions(4, 64, kv().cpuOffloadPages(8).build())))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("offload pages 8");
    }

    @Test
    void snapshotsWithoutSlotsAreRefused() {
        assertThatThrownBy(() -> new StateSnapshots(128, 0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("slots >= 1");
    }

    @Test
    void aDisaggregatedRoleIsRefused() {
        assertThatThrownBy(() -> HybridEngineLoader.load(TransformersFidelityTest.folder("bamba"), cpu,
                new EngineOptions(4, 64, kv().build()).withRole(EngineRole.PREFILL)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("colocated");
    }
}
