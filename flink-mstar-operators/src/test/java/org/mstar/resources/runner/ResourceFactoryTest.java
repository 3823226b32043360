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
    /** Builders are instantiated reflectively, so what they build is observed through this. */
    private static final List<String> CLEANED = new ArrayList<>();

    record TestSpec(String resourceKey, Set<String> dependsOn, String builderClassName) implements NodeResourceSpec {
        TestSpec(String key, String builder, String... deps) {
            this(key, Set.of(deps), builder);
        }

        @Override public Set<String> nodes() { return Set.of("decoder"); }
        @Override public void applyYamlOverrides(Map<String, Object> overrides) {}
    }

    record Built(NodeResourceSpec spec, EngineResourceInfo info) implements Resource {
        @Override public Set<String> dependsOn() { return spec.dependsOn(); }
        @Override public void cleanup() { CLEANED.add(spec.resourceKey()); }
    }

    public static final class BuiltBuilder implements ResourceBuilder {
        @Override
        public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
            return new Built(spec, info);
        }
    }

    public static final class FailingBuilder implements ResourceBuilder {
        @Override
        public Resource build(NodeResourceSpec spec, EngineResourceInfo info) {
            throw new IllegalStateException("no device memory for " + spec.resourceKey());
        }
    }

    public static final class NotABuilder {}

    private static final String BUILT = BuiltBuilder.class.getName();
    private static final EngineResourceInfo WORKER = EngineResourceInfo.singleRank(null, DType.BF16);

    private final ResourceFactory factory = new ResourceFactory();

    @BeforeEach
    void reset() {
        CLEANED.clear();
    }

    @Test
    void buildsEverySpecInTopologicalOrderWithItsDependenciesAndTransferNeed() {
        TestSpec attn = new TestSpec("attn", BUILT, "kv");
        TestSpec kv = new TestSpec("kv", BUILT);
        TestSpec sampler = new TestSpec("sampler", BUILT);

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
    void aMissingBuilderClassIsNamedWithItsResourceKey() {
        TestSpec spec = new TestSpec("kv", "org.mstar.resources.kv.NoSuchBuilder");

        assertThatThrownBy(() -> factory.build(spec, WORKER))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("'kv'")
                .hasMessageContaining("org.mstar.resources.kv.NoSuchBuilder");
    }

    @Test
    void aClassThatIsNotABuilderIsRefused() {
        TestSpec spec = new TestSpec("kv", NotABuilder.class.getName());

        assertThatThrownBy(() -> factory.build(spec, WORKER))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("'kv'")
                .hasMessageContaining(ResourceBuilder.class.getName());
    }

    @Test
    void aFailedBuildCleansUpWhatWasAlreadyBuiltInReverse() {
        List<TestSpec> specs = List.of(
                new TestSpec("a", BUILT), new TestSpec("b", BUILT, "a"), new TestSpec("c", FailingBuilder.class.getName(), "b"));

        assertThatThrownBy(() -> factory.buildAll(specs, WORKER, Set.of())).hasMessage("no device memory for c");
        assertThat(CLEANED).containsExactly("b", "a");
    }

    @Test
    void specsWithDuplicateKeysOrUndeclaredDependenciesAreRefusedBeforeAnyBuild() {
        assertThatThrownBy(() -> factory.buildAll(
                List.of(new TestSpec("kv", BUILT), new TestSpec("kv", BUILT)), WORKER, Set.of()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'kv'");
        assertThatThrownBy(() -> factory.buildAll(List.of(new TestSpec("attn", BUILT, "kv")), WORKER, Set.of()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'attn'").hasMessageContaining("'kv'");
    }

    @Test
    void infoRefusesARankOutsideTheGroup() {
        assertThatThrownBy(() -> new EngineResourceInfo(null, 2, 2, DType.BF16, false, Map.of()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("rank");
    }
}
