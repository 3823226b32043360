package org.mstar.resources.kv;

import org.mstar.resources.KVSpec;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.Resource;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceBuilder;

/**
 * Builds the {@link KVManager} of a {@link KVSpec} with a {@link PagedKVConfig}: a pool on the worker's
 * device in its KV dtype, sharded to this rank's heads.
 *
 * <p>{@link EngineResourceInfo} carries no transfer engine, so retrieval between workers through a transport is
 * wired by the deployment that places them: it builds with {@link #KVManagerBuilder(KvTransport)} (see
 * {@link InProcessKvTransport}). Built without one, a manager publishes its streams and retrieves those a
 * publication carries the pages of (a decoded hand-off, {@link PublishedKVCodec}), but refuses (terminally) to
 * pull another cache's.
 */
public final class KVManagerBuilder implements ResourceBuilder {
    private final KvTransport transport;

    /** Without a transport. */
    public KVManagerBuilder() {
        this(null);
    }

    /** @param transport the built manager's transport */
    public KVManagerBuilder(KvTransport transport) {
        this.transport = transport;
    }

    @Override
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        if (!(spec instanceof KVSpec kv) || !(kv.config() instanceof PagedKVConfig config)) {
            throw new IllegalArgumentException("KVManagerBuilder builds a KVSpec with a PagedKVConfig, got "
                    + spec.getClass().getSimpleName() + " '" + spec.resourceKey() + "'");
        }
        if (info.device() == null) {
            throw new IllegalArgumentException("KV resource '" + spec.resourceKey() + "' needs a device for its pool");
        }
        return new KVManager(config, info.device(), info.kvDType(), info.worldSize(), info.rank(), transport);
    }
}
