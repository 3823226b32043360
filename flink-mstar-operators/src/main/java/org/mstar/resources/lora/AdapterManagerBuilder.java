package org.mstar.resources.lora;

import org.mstar.resources.AdapterSpec;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceBuilder;

/** Builds an {@link AdapterManager} for an {@link AdapterSpec}; its stacks take the worker's storage dtype. */
public final class AdapterManagerBuilder implements ResourceBuilder {
    @Override
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        if (!(spec instanceof AdapterSpec as)) {
            throw new IllegalArgumentException("AdapterManagerBuilder builds an AdapterSpec, got "
                    + spec.getClass().getName());
        }
        return new AdapterManager(as, info.device(), info.kvDType());
    }
}
