package org.mstar.resources;

import java.util.Map;
import java.util.Set;

/** Cacheless attention declared per head geometry; see {@link RaggedAttentionConfig}. */
public record RaggedCrossAttentionSpec(String resourceKey, Set<String> nodes, RaggedAttentionConfig config) implements NodeResourceSpec {
    public RaggedCrossAttentionSpec {
        nodes = Set.copyOf(nodes);
    }

    @Override
    public void applyYamlOverrides(Map<String, Object> overrides) {
        YamlValues.refuseUnknown("RaggedCrossAttentionSpec '" + resourceKey + "'", overrides, Set.of());
    }
}
