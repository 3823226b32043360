package org.mstar.resources;

import java.util.Map;
import java.util.Set;

/**
 * Declares per-request adapters: {@code slots} device-resident places for the adapters of {@code library}, each
 * taken by an adapter when a request using it first runs and given to another, least recently used first, once no
 * running request uses it.
 */
public record AdapterSpec(String resourceKey, Set<String> nodes, AdapterLibrary library, int slots)
        implements NodeResourceSpec {
    public AdapterSpec {
        nodes = Set.copyOf(nodes);
        if (slots < 1) {
            throw new IllegalArgumentException("adapters need at least one slot, got " + slots);
        }
    }

    @Override
    public void applyYamlOverrides(Map<String, Object> overrides) {
        YamlValues.refuseUnknown("AdapterSpec '" + resourceKey + "'", overrides, Set.of());
    }
}
