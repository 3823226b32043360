package org.mstar.resources;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;

/**
 * Checks over a model's resource declarations that hold the same for specs (when a deployment is
 * validated) and for the resources built from them (when a runner is built).
 */
public final class ResourceDeclarations {
    /** Joins a cross-attention pair; never part of a label, so a plan label names exactly one pair. */
    private static final String CROSS = "->";

    private ResourceDeclarations() {}

    /**
     * Index specs by resource key.
     *
     * @return key → spec, in declaration order
     * @throws IllegalArgumentException naming a key declared twice, or a {@code dependsOn} key no spec declares
     */
    public static Map<String, NodeResourceSpec> resolveSpecDependencies(List<? extends NodeResourceSpec> specs) {
        Map<String, NodeResourceSpec> byKey = new LinkedHashMap<>();
        for (NodeResourceSpec spec : specs) {
            if (byKey.putIfAbsent(spec.resourceKey(), spec) != null) {
                throw new IllegalArgumentException("resource key '" + spec.resourceKey() + "' is declared twice");
            }
        }
        for (NodeResourceSpec spec : byKey.values()) {
            for (String dep : new TreeSet<>(spec.dependsOn())) {
                if (!byKey.containsKey(dep)) {
                    throw new IllegalArgumentException("resource '" + spec.resourceKey() + "' depends on '" + dep
                            + "', which is not declared; declared: " + new TreeSet<>(byKey.keySet()));
                }
            }
        }
        return Collections.unmodifiableMap(byKey);
    }

    /**
     * Keys in dependency order, by Kahn layering: each round takes every key whose dependencies are all
     * placed, sorted by name. The result depends only on the dependency graph, never on map order.
     *
     * @param items     resources or specs by key
     * @param dependsOn the keys an item depends on
     * @throws IllegalArgumentException naming the keys, for a dependency on an undeclared key, on itself,
     *                                  or a cycle
     */
    public static <T> List<String> topoSort(Map<String, T> items,
                                            Function<? super T, ? extends Collection<String>> dependsOn) {
        Map<String, Set<String>> deps = new HashMap<>();
        for (Map.Entry<String, T> e : items.entrySet()) {
            String key = e.getKey();
            Set<String> keyDeps = new TreeSet<>(dependsOn.apply(e.getValue()));
            if (keyDeps.contains(key)) {
                throw new IllegalArgumentException("resource '" + key + "' depends on itself");
            }
            for (String dep : keyDeps) {
                if (!items.containsKey(dep)) {
                    throw new IllegalArgumentException("resource '" + key + "' depends on '" + dep
                            + "', which is not declared; declared: " + new TreeSet<>(items.keySet()));
                }
            }
            deps.put(key, keyDeps);
        }

        Map<String, Integer> unplacedDeps = new HashMap<>();
        Map<String, List<String>> dependents = new HashMap<>();
        TreeSet<String> level = new TreeSet<>();
        for (Map.Entry<String, Set<String>> e : deps.entrySet()) {
            unplacedDeps.put(e.getKey(), e.getValue().size());
            for (String dep : e.getValue()) {
                dependents.computeIfAbsent(dep, k -> new ArrayList<>()).add(e.getKey());
            }
            if (e.getValue().isEmpty()) {
                level.add(e.getKey());
            }
        }
        List<String> order = new ArrayList<>(deps.size());
        while (!level.isEmpty()) {
            order.addAll(level);
            TreeSet<String> next = new TreeSet<>();
            for (String placed : level) {
                for (String dependent : dependents.getOrDefault(placed, List.of())) {
                    if (unplacedDeps.merge(dependent, -1, Integer::sum) == 0) {
                        next.add(dependent);
                    }
                }
            }
            level = next;
        }
        if (order.size() < deps.size()) {
            Set<String> unplaced = new TreeSet<>(deps.keySet());
            order.forEach(unplaced::remove);
            throw new IllegalArgumentException("dependency cycle: " + describeCycle(deps, unplaced)
                    + "; unresolved: " + unplaced);
        }
        return List.copyOf(order);
    }

    /** {@link #topoSort(Map, Function)} over a plain key → dependencies map. */
    public static List<String> topoSort(Map<String, ? extends Collection<String>> deps) {
        return topoSort(deps, Function.identity());
    }

    /**
     * The plan label a cross-attention pair runs under: {@code qLabel}'s spans attending {@code kvLabel}'s.
     *
     * @throws IllegalArgumentException for an empty label or one containing the pair separator, which would
     *                                  let two pairs share a plan label
     */
    public static String crossLabel(String qLabel, String kvLabel) {
        for (String label : List.of(qLabel, kvLabel)) {
            if (label.isEmpty() || label.contains(CROSS)) {
                throw new IllegalArgumentException("cross-attention label '" + label
                        + "' must be non-empty and must not contain '" + CROSS + "'");
            }
        }
        return qLabel + CROSS + kvLabel;
    }

    /**
     * One cycle among the unplaced keys, as "a -> b -> a" (a depends on b). Every unplaced key has an
     * unplaced dependency, so following the smallest one must revisit a key.
     */
    private static String describeCycle(Map<String, Set<String>> deps, Set<String> unplaced) {
        LinkedHashSet<String> path = new LinkedHashSet<>();
        String key = unplaced.iterator().next();
        while (path.add(key)) {
            key = deps.get(key).stream().filter(unplaced::contains).findFirst().orElseThrow();
        }
        List<String> walk = new ArrayList<>(path);
        List<String> cycle = new ArrayList<>(walk.subList(walk.indexOf(key), walk.size()));
        cycle.add(key);
        return String.join(" -> ", cycle);
    }
}
