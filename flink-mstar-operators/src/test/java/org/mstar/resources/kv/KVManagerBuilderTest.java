package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.KVSpec;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.Resource;
import org.mstar.resources.RingKVConfig;
import org.mstar.resources.RingKVLayerConfig;
import org.mstar.resources.builders.StandardBuilders;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceFactory;

class KVManagerBuilderTest {
    private final CpuDevice device = new CpuDevice(1);

    @Test
    void theFactoryBuildsAPagedManagerFromItsSpec() {
        KVSpec spec = new KVSpec("kv", Set.of("llm"),
                PagedKVConfig.builder(3, 8, 16, 512).maxNumPages(10).pageSize(8).build());
        Resource r = new ResourceFactory(StandardBuilders.all()).build(spec,
                new EngineResourceInfo(device, 2, 1, DType.BF16, false, Map.of()));
        assertThat(r).isInstanceOf(KVManager.class);
        KVManager kv = (KVManager) r;
        assertThat(kv.pool().shape()).containsExactly(3, 10, 2, 8, 4, 16);
        assertThat(kv.pool().dtype()).isEqualTo(DType.BF16);
        assertThat(kv.state().arena.freeCount()).isEqualTo(9);
        kv.assertPagesConserved();
    }

    @Test
    void aRingConfigIsNotItsToBuild() {
        RingKVConfig ring = new RingKVConfig(2, 2, 4, null, 128,
                List.of(new RingKVLayerConfig(4, 1, 1), new RingKVLayerConfig(4, 1, 1)), 1);
        KVSpec spec = new KVSpec("kv", Set.of("llm"), ring);
        assertThatThrownBy(() -> new KVManagerBuilder().build(spec, EngineResourceInfo.singleRank(device, DType.F32)))
                .hasMessageContaining("PagedKVConfig");
    }
}
