package org.mstar.resources;

import java.util.Map;
import java.util.Set;

/**
 * A model's declaration of one resource: its key, the graph nodes it serves, and what it depends on.
 *
 * <p>{@link #builderClassName()} names the class that builds the resource, as a string, so declaring a
 * resource never loads the manager or its kernels; {@code org.mstar.resources.runner.ResourceFactory}
 * resolves it.
 */
public interface NodeResourceSpec {
    String resourceKey();

    Set<String> nodes();

    /** Keys whose specs this one builds against. */
    default Set<String> dependsOn() {
        return Set.of();
    }

    /**
     * Fully qualified name of a {@code org.mstar.resources.runner.ResourceBuilder} with a public no-arg
     * constructor.
     */
    String builderClassName();

    /**
     * Patch this deployment's tunables from the spec's own YAML block. An unknown key is a typo and
     * must raise {@link IllegalArgumentException} naming it, never be silently ignored.
     */
    void applyYamlOverrides(Map<String, Object> overrides);
}
