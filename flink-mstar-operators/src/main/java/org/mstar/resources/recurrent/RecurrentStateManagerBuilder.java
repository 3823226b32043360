package org.mstar.resources.recurrent;

import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.RecurrentStateSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceBuilder;

/** Builds a {@link RecurrentStateManager} for a {@link RecurrentStateSpec}, in the dtypes the spec declares. */
public final class RecurrentStateManagerBuilder implements ResourceBuilder {
    @Override
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        if (!(spec instanceof RecurrentStateSpec rs)) {
            throw new IllegalArgumentException("RecurrentStateManagerBuilder builds a RecurrentStateSpec, got "
                    + spec.getClass().getName());
        }
        return new RecurrentStateManager(rs, info.device());
    }
}
