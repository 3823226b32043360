package org.mstar.resources;

import java.util.HashSet;
import java.util.Map;
import java.util.Set;

public record CrossAttentionSpec(String resourceKey, Set<String> nodes, CrossAttentionConfig config)
        implements NodeResourceSpec {
    public CrossAttentionSpec {
        nodes = Set.copyOf(nodes);
    }

    @Override
    public Set<String> dependsOn() {
        Set<String> deps = new HashSet<>();
        deps.add(config.kvCache());
        if (config.queryKvCache() != null) {
            deps.add(config.queryKvCache());
        }
        return Set.copyOf(deps);
    }

    @Override
    public void applyYamlOverrides(Map<String, Object> overrides) {
        YamlValues.refuseUnknown("CrossAttentionSpec '" + resourceKey + "'", overrides, Set.of());
    }
}
