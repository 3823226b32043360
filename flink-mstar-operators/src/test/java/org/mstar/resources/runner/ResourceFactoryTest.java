package org.mstar.resources.runner;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.Resource;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ResourceFactoryTest {
    /** What the built resources' cleanup saw. */
    private static final List<String> CLEANED = new ArrayList<>();

    record TestSpec(String resourceKey, Set<String> dependsOn) implements NodeResourceSpec {
        TestSpec(String key, String... deps) {
            this(key, Set.of(deps));
        }

        @Override public Set<String> nodes() { return Set.of("decoder"); }
        @Override public void applyYamlOverrides(Map<String, Object> overrides) {}
    }

    /** A spec whose builder fails. */
    record FailingSpec(String resourceKey, Set<String> dependsOn) implements NodeResourceSpec {
        @Override public Set<String> nodes() { return Set.of("decoder"); }
        @Override public void applyYamlOverrides(Map<String, Object> overrides) {}
    }

    record Built(NodeResourceSpec spec, EngineResourceInfo info) implements Resource {
        @Override public Set<String> dependsOn() { return spec.dependsOn(); }
        @Override public void cleanup() { CLEANED.add(spec.resourceKey()); }
    }

    private static final EngineResourceInfo WORKER = EngineResourceInfo.singleRank(null, DType.BF16);

    private final ResourceFactory factory = new ResourceFactory(ResourceBuilders.none()
            .with(TestSpec.class, Built::new)
            .with(FailingSpec.class, (spec, info) -> {
                throw new IllegalStateException("no device memory for " + spec.resourceKey());
            }));

    @BeforeEach
    void reset() {
        CLEANED.clear();
    }

    @Test
    void buildsEverySpecInTopologicalOrderWithItsDependenciesAndTransferNeed() {
        TestSpec attn = new TestSpec("attn", "kv");
        TestSpec kv = new TestSpec("kv");
        TestSpec sampler = new TestSpec("sampler");

        Map<String, Resource> built = factory.buildAll(List.of(attn, sampler, kv), WORKER, Set.of("kv"));

        assertThat(built.keySet()).containsExactly("kv", "sampler", "attn");
        Built builtAttn = (Built) built.get("attn");
        assertThat(builtAttn.spec()).isSameAs(attn);
        assertThat(builtAttn.info().dependencies()).isEqualTo(Map.of("kv", kv));
        assertThat(builtAttn.info().needsRemoteTransfer()).isFalse();
        assertThat(((Built) built.get("kv")).info().needsRemoteTransfer()).isTrue();
        assertThat(builtAttn.info().kvDType()).isEqualTo(DType.BF16);
    }

    @Test
    void aSpecTypeWithoutABuilderIsNamedWithItsResourceKey() {
        ResourceFactory none = new ResourceFactory(ResourceBuilders.none());

        assertThatThrownBy(() -> none.build(new TestSpec("kv"), WORKER))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("'kv'")
                .hasMessageContaining("TestSpec");
    }

    @Test
    void aBuilderThatBuildsNothingIsRefused() {
        ResourceFactory nothing = new ResourceFactory(ResourceBuilders.none()
                .with(TestSpec.class, (spec, info) -> null));

        assertThatThrownBy(() -> nothing.build(new TestSpec("kv"), WORKER))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("'kv'")
                .hasMessageContaining("built no resource");
    }

    @Test
    void aFailedBuildCleansUpWhatWasAlreadyBuiltInReverse() {
        List<NodeResourceSpec> specs = List.of(
                new TestSpec("a"), new TestSpec("b", "a"), new FailingSpec("c", Set.of("b")));

        assertThatThrownBy(() -> factory.buildAll(specs, WORKER, Set.of())).hasMessage("no device memory for c");
        assertThat(CLEANED).containsExactly("b", "a");
    }

    @Test
    void specsWithDuplicateKeysOrUndeclaredDependenciesAreRefusedBeforeAnyBuild() {
        assertThatThrownBy(() -> factory.buildAll(
                List.of(new TestSpec("kv"), new TestSpec("kv")), WORKER, Set.of()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'kv'");
        assertThatThrownBy(() -> factory.buildAll(List.of(new TestSpec("attn", "kv")), WORKER, Set.of()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'attn'").hasMessageContaining("'kv'");
    }

    @Test
    void infoRefusesARankOutsideTheGroup() {
        assertThatThrownBy(() -> new EngineResourceInfo(null, 2, 2, DType.BF16, false, Map.of()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("rank");
    }
}
