package org.mstar.resources.runner;

import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceDeclarations;

import java.lang.reflect.InvocationTargetException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Builds resources from their specs by resolving each {@link NodeResourceSpec#builderClassName()}
 * reflectively, so the declaration surface never links against managers or kernels.
 */
public final class ResourceFactory {
    private final ClassLoader loader;

    /** Resolves builders through {@code loader}: in a Flink task, the user-code class loader. */
    public ResourceFactory(ClassLoader loader) {
        this.loader = loader;
    }

    public ResourceFactory() {
        this(ResourceFactory.class.getClassLoader());
    }

    /**
     * Build one resource.
     *
     * @throws IllegalStateException naming the spec's key and builder class when the class is missing, is
     *                               not a {@link ResourceBuilder}, cannot be instantiated, or builds nothing
     */
    public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
        return checked(spec, builderFor(spec).build(spec, info));
    }

    private static Resource checked(NodeResourceSpec spec, Resource built) {
        if (built == null) {
            throw new IllegalStateException(where(spec) + " built no resource");
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
        return buildAll(specs, worker, remoteKeys, Map.of());
    }

    /**
     * {@link #buildAll(List, EngineResourceInfo, Set)}, with the resources of the keys in {@code builders} built
     * by the given builder instead of the spec's named one (a builder carrying what a deployment wires in, such as
     * a KV transport).
     */
    public Map<String, Resource> buildAll(List<? extends NodeResourceSpec> specs, EngineResourceInfo worker,
                                          Set<String> remoteKeys, Map<String, ResourceBuilder> builders) {
        Map<String, NodeResourceSpec> byKey = ResourceDeclarations.resolveSpecDependencies(specs);
        Map<String, Resource> built = new LinkedHashMap<>();
        try {
            for (String key : ResourceDeclarations.topoSort(byKey, NodeResourceSpec::dependsOn)) {
                NodeResourceSpec spec = byKey.get(key);
                Map<String, NodeResourceSpec> deps = new LinkedHashMap<>();
                spec.dependsOn().forEach(dep -> deps.put(dep, byKey.get(dep)));
                EngineResourceInfo info = worker.forSpec(deps, remoteKeys.contains(key));
                ResourceBuilder given = builders.get(key);
                built.put(key, given == null ? build(spec, info) : checked(spec, given.build(spec, info)));
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

    private ResourceBuilder builderFor(NodeResourceSpec spec) {
        String name = spec.builderClassName();
        Class<?> type;
        try {
            type = Class.forName(name, true, loader);
        } catch (ClassNotFoundException e) {
            throw new IllegalStateException(where(spec) + " is not on the classpath", e);
        }
        if (!ResourceBuilder.class.isAssignableFrom(type)) {
            throw new IllegalStateException(where(spec) + " does not implement " + ResourceBuilder.class.getName());
        }
        try {
            return (ResourceBuilder) type.getConstructor().newInstance();
        } catch (NoSuchMethodException e) {
            throw new IllegalStateException(where(spec) + " has no public no-arg constructor", e);
        } catch (InvocationTargetException e) {
            throw new IllegalStateException(where(spec) + " failed in its constructor", e.getCause());
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(where(spec) + " cannot be instantiated", e);
        }
    }

    private static String where(NodeResourceSpec spec) {
        return "resource '" + spec.resourceKey() + "': builder " + spec.builderClassName();
    }
}
