package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.llama.KvCacheOptions;

/**
 * What a Mamba2 or Bamba engine refuses, by name, rather than serve wrongly: a state after a prefix is not kept, so
 * no prefix cache or host offload of KV, and a recurrent state is neither handed off between engines yet.
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
    void aPrefixCacheOrHostOffloadIsRefused() {
        assertThatThrownBy(() -> HybridEngineLoader.load(TransformersFidelityTest.folder("mamba2"), cpu,
                new EngineOptions(4, 64, kv().prefixCache(true).build())))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("prefix cache true");
        assertThatThrownBy(() -> HybridEngineLoader.load(TransformersFidelityTest.folder("bamba"), cpu,
                new EngineOptions(4, 64, kv().cpuOffloadPages(8).build())))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("offload pages 8");
    }

    @Test
    void aDisaggregatedRoleIsRefused() {
        assertThatThrownBy(() -> HybridEngineLoader.load(TransformersFidelityTest.folder("bamba"), cpu,
                new EngineOptions(4, 64, kv().build()).withRole(EngineRole.PREFILL)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("colocated");
    }
}
