package org.mstar.resources.kv.ring;

import org.mstar.resources.KVSpec;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.RingKVConfig;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceBuilder;

/** Builds the {@link RingKVManager} of a {@link KVSpec} with a {@link RingKVConfig}, sharded to this rank's heads. */
public final class RingKVManagerBuilder implements ResourceBuilder {
    @Override
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        if (!(spec instanceof KVSpec kv) || !(kv.config() instanceof RingKVConfig config)) {
            throw new IllegalArgumentException("RingKVManagerBuilder builds a KVSpec with a RingKVConfig, got "
                    + spec.getClass().getSimpleName() + " '" + spec.resourceKey() + "'");
        }
        if (info.device() == null) {
            throw new IllegalArgumentException("ring KV resource '" + spec.resourceKey() + "' needs a device for its buffers");
        }
        config.shard(info.worldSize());
        return new RingKVManager(config, info.device(), info.kvDType());
    }
}
