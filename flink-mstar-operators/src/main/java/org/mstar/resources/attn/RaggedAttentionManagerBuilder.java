package org.mstar.resources.attn;

import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceBuilder;

/**
 * Named by the ragged (cacheless) attention specs: plain, cross and block-causal. None is implemented
 * yet, so building one fails loudly.
 */
public final class RaggedAttentionManagerBuilder implements ResourceBuilder {
    @Override
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        throw new UnsupportedOperationException("ragged attention ('" + spec.resourceKey() + "', "
                + spec.getClass().getSimpleName() + ") is not yet supported by flink-mstar");
    }
}
