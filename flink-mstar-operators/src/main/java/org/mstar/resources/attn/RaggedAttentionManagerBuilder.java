package org.mstar.resources.attn;

import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.RaggedAttentionConfig;
import org.mstar.resources.RaggedAttentionSpec;
import org.mstar.resources.RaggedBlockCausalAttentionSpec;
import org.mstar.resources.RaggedCrossAttentionSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceBuilder;

/**
 * Builds the {@link RaggedAttentionManager} of the ragged specs: {@link RaggedAttentionSpec} (self),
 * {@link RaggedCrossAttentionSpec} (cross) and {@link RaggedBlockCausalAttentionSpec} (block-causal). Both
 * backends (AUTO, FLASHINFER) run {@code ComputeOps.raggedAttention}; a head dim the device has no kernel for
 * is refused here.
 */
public final class RaggedAttentionManagerBuilder implements ResourceBuilder {
    @Override
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        RaggedAttentionConfig config;
        RaggedAttentionManager.Kind kind;
        int blockSize = 0;
        if (spec instanceof RaggedAttentionSpec s) {
            config = s.config();
            kind = RaggedAttentionManager.Kind.SELF;
        } else if (spec instanceof RaggedCrossAttentionSpec s) {
            config = s.config();
            kind = RaggedAttentionManager.Kind.CROSS;
        } else if (spec instanceof RaggedBlockCausalAttentionSpec s) {
            config = s.config();
            kind = RaggedAttentionManager.Kind.BLOCK_CAUSAL;
            blockSize = s.blockSize();
        } else {
            throw new IllegalArgumentException("RaggedAttentionManagerBuilder builds the ragged attention specs, got "
                    + spec.getClass().getName());
        }
        if (info.device() != null) {
            info.device().ops().requireRaggedAttentionHeadDim(config.headDim(), info.kvDType());
        }
        return new RaggedAttentionManager(kind, config, info.worldSize(), blockSize, info.device());
    }
}
