package org.mstar.resources.position;

import org.mstar.resources.KVSpec;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PositionConfig;
import org.mstar.resources.PositionSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceBuilder;

/** Builds a {@link RopeManager} for a {@link PositionSpec}; the rotary dim defaults to its KV cache's head dim. */
public final class RopeManagerBuilder implements ResourceBuilder {
    @Override
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        if (!(spec instanceof PositionSpec ps)) {
            throw new IllegalArgumentException("RopeManagerBuilder builds a PositionSpec, got " + spec.getClass().getName());
        }
        PositionConfig config = ps.config();
        if (!(info.dependencies().get(config.kvCache()) instanceof KVSpec kv)) {
            throw new IllegalArgumentException("positions '" + spec.resourceKey() + "' need KV spec '" + config.kvCache()
                    + "' among their dependencies, got " + info.dependencies().keySet());
        }
        return new RopeManager(config, kv.config().headDim(), info.device());
    }
}
