package org.mstar.resources.sampler;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.SamplerSpec;
import org.mstar.resources.builders.StandardBuilders;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceFactory;

class SamplerResourceBuilderTest {
    private final CpuDevice device = new CpuDevice(1);

    @AfterEach
    void closeDevice() {
        device.close();
    }

    @Test
    void buildsTheSamplerFromItsSpec() {
        SamplerSpec spec = new SamplerSpec("sampler", Set.of("llm"), 32);

        assertThat(new ResourceFactory(StandardBuilders.all())
                .build(spec, EngineResourceInfo.singleRank(device, DType.BF16))).isInstanceOf(SamplerResource.class);
    }
}
