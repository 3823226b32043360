package org.mstar.resources.runner;

import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.Resource;

/** Builds the resource a spec declares, once at model load; {@link ResourceBuilders} says for which spec types. */
@FunctionalInterface
public interface ResourceBuilder {
    /**
     * @param spec the declaration, with this deployment's YAML overrides already applied
     * @param info what this worker offers the resource: device, parallel group, KV dtype, dependencies
     * @return a new resource; never null
     */
    Resource build(NodeResourceSpec spec, EngineResourceInfo info);
}
