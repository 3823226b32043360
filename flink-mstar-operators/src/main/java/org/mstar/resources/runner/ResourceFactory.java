package org.mstar.resources.runner;

import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceDeclarations;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** Builds resources from their specs, each by the builder its spec's type has in a {@link ResourceBuilders}. */
public final class ResourceFactory {
    private final ResourceBuilders builders;

    /** @param builders the builder of each spec type to build (the library's: {@code StandardBuilders.all()}) */
    public ResourceFactory(ResourceBuilders builders) {
        this.builders = builders;
    }

    /**
     * Build one resource.
     *
     * @throws IllegalStateException naming the spec's key when no builder builds its type, or its builder builds
     *                               nothing
     */
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        Resource built = builders.forSpec(spec).build(spec, info);
        if (built == null) {
            throw new IllegalStateException("resource '" + spec.resourceKey() + "': its "
                    + spec.getClass().getSimpleName() + " built no resource");
        }
        return built;
    }

    /**
     * Build every spec, in topological order, each with its own dependencies and transfer need filled
     * into {@code worker}. If one build fails, the resources already built are cleaned up, in reverse.
     *
     * @param remoteKeys keys whose consumers live on another worker
     * @return key → resource, in topological order
     * @throws IllegalArgumentException for duplicate keys, undeclared dependencies or a cycle
     */
    public Map<String, Resource> buildAll(List<? extends NodeResourceSpec> specs, EngineResourceInfo worker,
                                          Set<String> remoteKeys) {
        Map<String, NodeResourceSpec> byKey = ResourceDeclarations.resolveSpecDependencies(specs);
        Map<String, Resource> built = new LinkedHashMap<>();
        try {
            for (String key : ResourceDeclarations.topoSort(byKey, NodeResourceSpec::dependsOn)) {
                NodeResourceSpec spec = byKey.get(key);
                Map<String, NodeResourceSpec> deps = new LinkedHashMap<>();
                spec.dependsOn().forEach(dep -> deps.put(dep, byKey.get(dep)));
                built.put(key, build(spec, worker.forSpec(deps, remoteKeys.contains(key))));
            }
        } catch (RuntimeException e) {
            List<Resource> undo = new ArrayList<>(built.values());
            Collections.reverse(undo);
            for (Resource r : undo) {
                try {
                    r.cleanup();
                } catch (RuntimeException suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            throw e;
        }
        return Collections.unmodifiableMap(built);
    }
}
