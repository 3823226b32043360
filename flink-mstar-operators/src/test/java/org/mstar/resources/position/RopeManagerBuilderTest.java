package org.mstar.resources.position;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.KVSpec;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.PositionConfig;
import org.mstar.resources.PositionSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.builders.StandardBuilders;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceFactory;

class RopeManagerBuilderTest {
    private static final ResourceFactory FACTORY = new ResourceFactory(StandardBuilders.all());

    private final CpuDevice device = new CpuDevice(1);

    @AfterEach
    void closeDevice() {
        device.close();
    }

    @Test
    void buildsRopeOverTheKvHeadDim() {
        KVSpec kv = new KVSpec("kv", Set.of("llm"), PagedKVConfig.builder(2, 4, 64, 256).build());
        PositionSpec spec = new PositionSpec("pos", Set.of("llm"), new PositionConfig("kv").withTheta(500000.0));

        Resource built = FACTORY.build(spec,
                new EngineResourceInfo(device, 1, 0, DType.BF16, false, Map.of("kv", kv)));

        assertThat(built).isInstanceOf(RopeManager.class);
        RopeManager rope = (RopeManager) built;
        assertThat(rope.ropeParams().rotaryDim()).isEqualTo(64);
        assertThat(rope.ropeParams().theta()).isEqualTo(500000.0);
        assertThat(rope.dependsOn()).containsExactly("kv");
    }

    @Test
    void theKvSpecMustBeAmongTheDependencies() {
        PositionSpec spec = new PositionSpec("pos", Set.of("llm"), new PositionConfig("kv"));

        assertThatThrownBy(() -> FACTORY.build(spec, EngineResourceInfo.singleRank(device, DType.BF16)))
                .hasMessageContaining("need KV spec 'kv'");
    }
}
