package org.mstar.resources.sampler;

import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.SamplerSpec;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceBuilder;

/** Builds a {@link SamplerResource} for a {@link SamplerSpec}. */
public final class SamplerResourceBuilder implements ResourceBuilder {
    @Override
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        if (!(spec instanceof SamplerSpec ss)) {
            throw new IllegalArgumentException("SamplerResourceBuilder builds a SamplerSpec, got " + spec.getClass().getName());
        }
        return new SamplerResource(ss, info.device());
    }
}
