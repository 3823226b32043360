package org.mstar.resources.attn;

import org.mstar.resources.CrossAttentionConfig;
import org.mstar.resources.CrossAttentionSpec;
import org.mstar.resources.KVLayout;
import org.mstar.resources.KVSpec;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.Resource;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceBuilder;

/**
 * Builds the {@link CrossAttentionManager} a {@link CrossAttentionSpec} asks for. The context must live in a
 * paged NHD KV cache; the query side, when named, must be a KV resource too. Every backend but the paged
 * kernel's (AUTO, FLASHINFER, DENSE) is refused at build.
 */
public final class CrossAttentionManagerBuilder implements ResourceBuilder {
    @Override
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        if (!(spec instanceof CrossAttentionSpec cs)) {
            throw new IllegalArgumentException("CrossAttentionManagerBuilder builds a CrossAttentionSpec, got "
                    + spec.getClass().getName());
        }
        CrossAttentionConfig config = cs.config();
        String key = spec.resourceKey();
        if (!(info.dependencies().get(config.kvCache()) instanceof KVSpec kvSpec)) {
            throw new IllegalArgumentException("cross-attention '" + key + "' needs KV spec '" + config.kvCache()
                    + "' among its dependencies, got " + info.dependencies().keySet());
        }
        if (config.queryKvCache() != null && !(info.dependencies().get(config.queryKvCache()) instanceof KVSpec)) {
            throw new IllegalArgumentException("cross-attention '" + key + "' packs its queries from KV spec '"
                    + config.queryKvCache() + "', which is not among its dependencies " + info.dependencies().keySet());
        }
        if (!(kvSpec.config() instanceof PagedKVConfig kv) || kv.layout() == KVLayout.MLA) {
            throw new UnsupportedOperationException("cross-attention '" + key + "' needs a paged NHD KV cache for its "
                    + "context, but '" + config.kvCache() + "' is " + kvSpec.config().getClass().getSimpleName());
        }
        switch (config.backend()) {
            case AUTO, FLASHINFER, DENSE -> { }
            default -> throw new UnsupportedOperationException("cross-attention '" + key + "': backend "
                    + config.backend() + " is not supported; supported: AUTO, FLASHINFER, DENSE (all run paged attention)");
        }
        kv.shard(info.worldSize()); // idempotent: the KV resource shards the same shared config
        if (info.device() != null) {
            info.device().ops().requireAttentionHeadDim(kv.headDim(), info.kvDType());
        }
        return new CrossAttentionManager(config, kv.headDim(), kv.maxSeqLen(), info.device());
    }
}
