package org.mstar.resources.runner;

import java.util.HashMap;
import java.util.Map;
import org.mstar.resources.NodeResourceSpec;

/**
 * Which builder builds each type of spec. A spec names no builder (declaring a resource must not load its manager);
 * its type picks one here, by class, where the compiler and the layering rules see the link.
 */
public final class ResourceBuilders {
    private final Map<Class<? extends NodeResourceSpec>, ResourceBuilder> byType;

    private ResourceBuilders(Map<Class<? extends NodeResourceSpec>, ResourceBuilder> byType) {
        this.byType = Map.copyOf(byType);
    }

    /** No builder at all. */
    public static ResourceBuilders none() {
        return new ResourceBuilders(Map.of());
    }

    /** These builders, with specs of exactly {@code type} built by {@code builder} instead of any before. */
    public ResourceBuilders with(Class<? extends NodeResourceSpec> type, ResourceBuilder builder) {
        Map<Class<? extends NodeResourceSpec>, ResourceBuilder> next = new HashMap<>(byType);
        next.put(type, builder);
        return new ResourceBuilders(next);
    }

    /** @throws IllegalStateException naming the spec's key and type when no builder builds that type */
    ResourceBuilder forSpec(NodeResourceSpec spec) {
        ResourceBuilder b = byType.get(spec.getClass());
        if (b == null) {
            throw new IllegalStateException("resource '" + spec.resourceKey() + "': no builder builds a "
                    + spec.getClass().getSimpleName());
        }
        return b;
    }
}
