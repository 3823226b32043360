package org.mstar.resources;

import java.util.Map;
import java.util.Set;

/**
 * A model's declaration of one resource: its key, the graph nodes it serves, and what it depends on.
 *
 * <p>A declaration names no builder, so declaring a resource never loads the manager or its kernels: the spec's
 * type picks it ({@code org.mstar.resources.runner.ResourceBuilders}, the standard ones in
 * {@code org.mstar.resources.builders.StandardBuilders}).
 */
public interface NodeResourceSpec {
    String resourceKey();

    Set<String> nodes();

    /** Keys whose specs this one builds against. */
    default Set<String> dependsOn() {
        return Set.of();
    }

    /**
     * Patch this deployment's tunables from the spec's own YAML block. An unknown key is a typo and
     * must raise {@link IllegalArgumentException} naming it, never be silently ignored.
     */
    void applyYamlOverrides(Map<String, Object> overrides);
}
