package org.mstar.resources;

import java.util.Map;
import java.util.Set;

public record AttentionSpec(String resourceKey, Set<String> nodes, AttentionConfig config) implements NodeResourceSpec {
    public AttentionSpec {
        nodes = Set.copyOf(nodes);
    }

    @Override
    public Set<String> dependsOn() {
        return Set.of(config.kvCache());
    }

    @Override
    public void applyYamlOverrides(Map<String, Object> overrides) {
        config.applyYamlOverrides("AttentionSpec '" + resourceKey + "'", overrides);
    }
}
