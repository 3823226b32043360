package org.mstar.resources.attn;

import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceBuilder;

/** Named by {@code CrossAttentionSpec}. Cross-attention is not implemented yet, so building one fails loudly. */
public final class CrossAttentionManagerBuilder implements ResourceBuilder {
    @Override
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        throw new UnsupportedOperationException("cross-attention ('" + spec.resourceKey() + "', "
                + spec.getClass().getSimpleName() + ") is not yet supported by flink-mstar");
    }
}
