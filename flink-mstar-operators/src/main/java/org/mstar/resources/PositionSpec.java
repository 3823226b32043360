package org.mstar.resources;

import java.util.Map;
import java.util.Set;

public record PositionSpec(String resourceKey, Set<String> nodes, PositionConfig config) implements NodeResourceSpec {
    public PositionSpec {
        nodes = Set.copyOf(nodes);
    }

    @Override
    public Set<String> dependsOn() {
        return Set.of(config.kvCache());
    }

    @Override
    public void applyYamlOverrides(Map<String, Object> overrides) {
        YamlValues.refuseUnknown("PositionSpec '" + resourceKey + "'", overrides, Set.of());
    }
}
