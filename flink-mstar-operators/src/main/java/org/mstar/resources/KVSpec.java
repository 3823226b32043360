package org.mstar.resources;

import java.util.Map;
import java.util.Set;

/** Declares a KV cache; the builder dispatches on the config's storage strategy. */
public record KVSpec(String resourceKey, Set<String> nodes, KVConfig config) implements NodeResourceSpec {
    public KVSpec {
        nodes = Set.copyOf(nodes);
    }

    /** Forwarded to the config: which keys are legal is a property of the storage strategy. */
    @Override
    public void applyYamlOverrides(Map<String, Object> overrides) {
        config.applyYamlOverrides(overrides);
    }
}
