package org.mstar.resources;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** topoSort over random DAGs: deterministic, edge-respecting, layered and alphabetical; cycles refused. */
class TopoSortPropertiesTest {

    /** A random DAG: key i may depend only on keys created before it, under shuffled names. */
    @Provide
    Arbitrary<Map<String, Set<String>>> dags() {
        Arbitrary<List<String>> names = Arbitraries.strings().withCharRange('a', 'f').ofMinLength(1).ofMaxLength(3)
                .set().ofMinSize(1).ofMaxSize(12).map(ArrayList::new);
        return Combinators.combine(names, Arbitraries.longs()).as((keys, seed) -> {
            Collections.shuffle(keys, new Random(seed));
            Random edges = new Random(seed + 1);
            Map<String, Set<String>> deps = new HashMap<>();
            for (int i = 0; i < keys.size(); i++) {
                Set<String> d = new TreeSet<>();
                for (int j = 0; j < i; j++) {
                    if (edges.nextInt(3) == 0) {
                        d.add(keys.get(j));
                    }
                }
                deps.put(keys.get(i), d);
            }
            return deps;
        });
    }

    @Property
    void theOrderDoesNotDependOnInsertionOrder(@ForAll("dags") Map<String, Set<String>> deps, @ForAll long seed) {
        List<String> keys = new ArrayList<>(deps.keySet());
        Collections.shuffle(keys, new Random(seed));
        Map<String, Set<String>> reinserted = new LinkedHashMap<>();
        keys.forEach(k -> reinserted.put(k, deps.get(k)));

        assertThat(ResourceDeclarations.topoSort(reinserted)).isEqualTo(ResourceDeclarations.topoSort(deps));
    }

    @Property
    void everyKeyComesAfterItsDependencies(@ForAll("dags") Map<String, Set<String>> deps) {
        List<String> order = ResourceDeclarations.topoSort(deps);

        assertThat(order).containsExactlyInAnyOrderElementsOf(deps.keySet());
        deps.forEach((key, keyDeps) -> keyDeps.forEach(
                dep -> assertThat(order.indexOf(dep)).as("%s before %s", dep, key).isLessThan(order.indexOf(key))));
    }

    /** Kahn layering: a key's level is one past its deepest dependency; the order sorts by (level, name). */
    @Property
    void theOrderIsLevelByLevelAndAlphabeticalWithinALevel(@ForAll("dags") Map<String, Set<String>> deps) {
        List<String> order = ResourceDeclarations.topoSort(deps);
        Map<String, Integer> level = new HashMap<>();
        for (String key : order) {
            level.put(key, deps.get(key).stream().mapToInt(d -> level.get(d) + 1).max().orElse(0));
        }

        List<String> expected = new ArrayList<>(deps.keySet());
        expected.sort(Comparator.<String>comparingInt(level::get).thenComparing(Comparator.naturalOrder()));
        assertThat(order).isEqualTo(expected);
    }

    /**
     * Closing a cycle (a dependency d of some key k made to depend on k, or a key on itself when no key has
     * dependencies) is refused, naming as unresolved exactly the keys that reach the cycle.
     */
    @Property
    void aCycleIsRefusedNamingTheKeysItBlocks(@ForAll("dags") Map<String, Set<String>> deps,
                                              @ForAll @IntRange(min = 0, max = 1000) int pick) {
        List<String> withDeps = deps.keySet().stream().filter(k -> !deps.get(k).isEmpty()).sorted().toList();
        Map<String, Set<String>> cyclic = new HashMap<>(deps);
        if (withDeps.isEmpty()) {
            String key = new TreeSet<>(deps.keySet()).first();
            cyclic.put(key, Set.of(key));
            assertThatThrownBy(() -> ResourceDeclarations.topoSort(cyclic))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("'" + key + "' depends on itself");
            return;
        }
        String k = withDeps.get(pick % withDeps.size());
        String d = deps.get(k).iterator().next();
        Set<String> closed = new TreeSet<>(deps.get(d));
        closed.add(k);
        cyclic.put(d, closed);

        Set<String> blocked = new TreeSet<>();
        for (String key : deps.keySet()) {
            if (reaches(cyclic, key, d)) {
                blocked.add(key);
            }
        }
        assertThatThrownBy(() -> ResourceDeclarations.topoSort(cyclic))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("dependency cycle")
                .hasMessageEndingWith("unresolved: " + blocked);
    }

    /** Whether {@code from} depends, directly or not, on {@code to} (or is it). */
    private static boolean reaches(Map<String, Set<String>> deps, String from, String to) {
        Set<String> seen = new TreeSet<>();
        List<String> todo = new ArrayList<>(List.of(from));
        while (!todo.isEmpty()) {
            String key = todo.remove(todo.size() - 1);
            if (key.equals(to)) {
                return true;
            }
            if (seen.add(key)) {
                todo.addAll(deps.get(key));
            }
        }
        return false;
    }
}
