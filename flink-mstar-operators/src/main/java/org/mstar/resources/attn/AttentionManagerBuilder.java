package org.mstar.resources.attn;

import org.mstar.resources.AttentionConfig;
import org.mstar.resources.AttentionSpec;
import org.mstar.resources.KVLayout;
import org.mstar.resources.KVSpec;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.Resource;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.KvPoolDType;
import org.mstar.resources.runner.ResourceBuilder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Builds the attention an {@link AttentionSpec} asks for. This build has one kernel family, the paged
 * attention of {@code ComputeOps.pagedAttention} over an NHD page pool: AUTO and FLASHINFER resolve to it,
 * and so does DENSE (the two are drop-in for each other; the choice is logged as a warning). Over an MLA page layout
 * the same manager plans the latent attention ({@code AttentionManager.runLatent}); its softmax scale is the
 * configured one or {@code 1/sqrt(headDim)} of the KV config's query head dim. FLASHINFER_MLA, FLEX and XPU_PAGED are
 * refused at build rather than run as something else.
 */
public final class AttentionManagerBuilder implements ResourceBuilder {
    private static final Logger LOG = LoggerFactory.getLogger(AttentionManagerBuilder.class);

    @Override
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        if (!(spec instanceof AttentionSpec as)) {
            throw new IllegalArgumentException("AttentionManagerBuilder builds an AttentionSpec, got "
                    + spec.getClass().getName());
        }
        AttentionConfig config = as.config();
        String key = spec.resourceKey();
        if (!(info.dependencies().get(config.kvCache()) instanceof KVSpec kvSpec)) {
            throw new IllegalArgumentException("attention '" + key + "' needs KV spec '" + config.kvCache()
                    + "' among its dependencies, got " + info.dependencies().keySet());
        }
        if (!(kvSpec.config() instanceof PagedKVConfig kv)) {
            throw new UnsupportedOperationException("attention '" + key + "': paged attention needs a paged KV cache, but '"
                    + config.kvCache() + "' is " + kvSpec.config().getClass().getSimpleName());
        }
        switch (config.backend()) {
            case AUTO, FLASHINFER -> LOG.info("attention '{}': backend {} runs the paged attention kernel on {}", key,
                    config.backend(), info.device().name());
            case DENSE -> LOG.warn("attention '{}': backend DENSE is not built here; running the paged attention kernel "
                    + "on {} instead (DENSE -> paged)", key, info.device().name());
            default -> throw new UnsupportedOperationException("attention '" + key + "': backend " + config.backend()
                    + " is not supported by this build; supported: AUTO, FLASHINFER, DENSE (all run paged attention)");
        }
        kv.shard(info.worldSize()); // idempotent: KV shards the same shared config
        if (kv.layout() != KVLayout.MLA) {
            // an FP8 pool has fewer head dims with kernels than the model's dtype, which the weights checked
            info.device().ops().requireAttentionHeadDim(kv.headDim(), KvPoolDType.of(kv.cacheDType(), info.kvDType()));
        }
        return new AttentionManager(config, kv.headDim(), kv.maxSeqLen(), info.device());
    }
}
