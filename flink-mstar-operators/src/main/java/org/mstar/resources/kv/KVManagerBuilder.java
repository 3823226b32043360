package org.mstar.resources.kv;

import org.mstar.resources.KVSpec;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.Resource;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceBuilder;

/**
 * Builds the paged {@link KVManager} a {@link KVSpec} with a {@link PagedKVConfig} declares, without a transport: retrieval
 * between workers is wired by the deployment that places them (see {@link InProcessKvTransport}).
 */
public final class KVManagerBuilder implements ResourceBuilder {
    @Override
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        if (!(spec instanceof KVSpec kv) || !(kv.config() instanceof PagedKVConfig paged)) {
            throw new IllegalArgumentException("KVManagerBuilder builds a KVSpec with a PagedKVConfig, got " + spec);
        }
        // a cache that pulls from other workers gets its transport wired by whoever deploys them together
        return new KVManager(paged, info.device(), info.kvDType(), info.worldSize(), info.rank(), null);
    }
}
