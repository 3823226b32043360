package org.mstar.resources;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ResourceDeclarationsTest {
    private static PagedKVConfig kvConfig() {
        return PagedKVConfig.builder(2, 2, 64, 4096).build();
    }

    @Test
    void specsAreIndexedByKeyInDeclarationOrder() {
        KVSpec kv = new KVSpec("kv", Set.of("decoder"), kvConfig());
        AttentionSpec attn = new AttentionSpec("attn", Set.of("decoder"), new AttentionConfig("kv"));

        Map<String, NodeResourceSpec> byKey = ResourceDeclarations.resolveSpecDependencies(List.of(attn, kv));

        assertThat(byKey).containsExactly(Map.entry("attn", attn), Map.entry("kv", kv));
        assertThat(ResourceDeclarations.topoSort(byKey, NodeResourceSpec::dependsOn)).containsExactly("kv", "attn");
    }

    @Test
    void aDuplicateKeyIsNamed() {
        KVSpec kv = new KVSpec("kv", Set.of("decoder"), kvConfig());

        assertThatThrownBy(() -> ResourceDeclarations.resolveSpecDependencies(List.of(kv, kv)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'kv'");
    }

    @Test
    void aDependencyOnAnUndeclaredSpecNamesBoth() {
        AttentionSpec attn = new AttentionSpec("attn", Set.of("decoder"), new AttentionConfig("kv_cache"));

        assertThatThrownBy(() -> ResourceDeclarations.resolveSpecDependencies(List.of(attn)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'attn'").hasMessageContaining("'kv_cache'");
    }

    @Test
    void topoSortRefusesSelfDependenciesAndMissingKeysByName() {
        assertThatThrownBy(() -> ResourceDeclarations.topoSort(Map.of("kv", Set.of("kv"))))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'kv' depends on itself");
        assertThatThrownBy(() -> ResourceDeclarations.topoSort(Map.of("attn", Set.of("kv"))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'attn'").hasMessageContaining("'kv'");
    }

    @Test
    void aCycleIsReportedWithItsKeysAndWhatItBlocks() {
        Map<String, Set<String>> deps = Map.of(
                "a", Set.of("c"), "b", Set.of("a"), "c", Set.of("b"), "d", Set.of("a"), "e", Set.of());

        assertThatThrownBy(() -> ResourceDeclarations.topoSort(deps))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("a -> c -> b -> a")
                .hasMessageContaining("unresolved: [a, b, c, d]");
    }

    @Test
    void crossLabelsNameOnePairEach() {
        assertThat(ResourceDeclarations.crossLabel("main", "context")).isEqualTo("main->context");
        assertThat(ResourceDeclarations.crossLabel("main", "context"))
                .isNotEqualTo(ResourceDeclarations.crossLabel("context", "main"));
        assertThatThrownBy(() -> ResourceDeclarations.crossLabel("a->b", "c"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'a->b'");
        assertThatThrownBy(() -> ResourceDeclarations.crossLabel("main", ""))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
