package org.mstar.resources.attn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AttentionConfig;
import org.mstar.resources.AttentionSpec;
import org.mstar.resources.AttnBackend;
import org.mstar.resources.CrossAttentionConfig;
import org.mstar.resources.CrossAttentionSpec;
import org.mstar.resources.KVLayout;
import org.mstar.resources.KVSpec;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.RaggedAttentionConfig;
import org.mstar.resources.RaggedAttentionSpec;
import org.mstar.resources.RaggedAttnBackend;
import org.mstar.resources.RaggedBlockCausalAttentionSpec;
import org.mstar.resources.RaggedCrossAttentionSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.RingKVConfig;
import org.mstar.resources.RingKVLayerConfig;
import org.mstar.resources.builders.StandardBuilders;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceFactory;

class AttentionManagerBuilderTest {
    private final CpuDevice device = new CpuDevice(1);
    private final ResourceFactory factory = new ResourceFactory(StandardBuilders.all());

    @AfterEach
    void closeDevice() {
        device.close();
    }

    private static KVSpec pagedKv(KVLayout layout) {
        return new KVSpec("kv", Set.of("llm"), PagedKVConfig.builder(2, 4, 64, 256).pageSize(16).layout(layout).build());
    }

    private Resource build(NodeResourceSpec spec, KVSpec kv, int worldSize) {
        EngineResourceInfo info = new EngineResourceInfo(device, worldSize, 0, DType.BF16, false,
                kv == null ? Map.of() : Map.of("kv", kv));
        return factory.build(spec, info);
    }

    private static AttentionSpec attention(AttentionConfig config) {
        return new AttentionSpec("attn", Set.of("llm"), config);
    }

    private static AttentionConfig withBackend(AttnBackend backend) {
        return new AttentionConfig("kv", backend, "auto", null, List.of(), 128);
    }

    @ParameterizedTest
    @EnumSource(value = AttnBackend.class, names = {"AUTO", "FLASHINFER", "DENSE"})
    void pagedBackendsBuildThePagedManager(AttnBackend backend) {
        Resource built = build(attention(withBackend(backend)), pagedKv(KVLayout.NHD), 1);

        assertThat(built).isInstanceOf(AttentionManager.class);
        AttentionManager attn = (AttentionManager) built;
        assertThat(attn.smScale()).isEqualTo(0.125f);
        assertThat(attn.windowLeft()).isEqualTo(127);
        assertThat(attn.dependsOn()).containsExactly("kv");
    }

    @ParameterizedTest
    @EnumSource(value = AttnBackend.class, names = {"FLASHINFER_MLA", "FLEX", "XPU_PAGED"})
    void otherBackendsAreRefusedAtBuild(AttnBackend backend) {
        assertThatThrownBy(() -> build(attention(withBackend(backend)), pagedKv(KVLayout.NHD), 1))
                .isInstanceOf(UnsupportedOperationException.class)
                .hasMessageContaining("backend " + backend + " is not supported");
    }

    /** Over latent pages the same manager plans; its default scale is that of the KV config's query head dim. */
    @Test
    void anMlaPageLayoutGetsTheLatentAttentionManager() {
        KVSpec mla = new KVSpec("kv", Set.of("llm"), PagedKVConfig.builder(2, 1, 192, 256).numQoHeads(16)
                .layout(KVLayout.MLA).kvLoraRank(512).qkRopeHeadDim(64).build());

        AttentionManager manager = (AttentionManager) build(attention(new AttentionConfig("kv")), mla, 1);
        assertThat(manager.smScale()).isEqualTo((float) (1 / Math.sqrt(192)));
    }

    @Test
    void aRingKvCacheIsRefused() {
        KVSpec ring = new KVSpec("kv", Set.of("llm"), new RingKVConfig(1, 2, 64, null, 128,
                List.of(new RingKVLayerConfig(4, 4, 1)), 1));

        assertThatThrownBy(() -> build(attention(new AttentionConfig("kv")), ring, 1))
                .isInstanceOf(UnsupportedOperationException.class).hasMessageContaining("paged KV cache");
    }

    @Test
    void theKvSpecMustBeAmongTheDependencies() {
        assertThatThrownBy(() -> build(attention(new AttentionConfig("kv")), null, 1))
                .hasMessageContaining("needs KV spec 'kv'");
    }

    @Test
    void buildingShardsTheSharedKvConfigIdempotently() {
        KVSpec kv = pagedKv(KVLayout.NHD);

        build(attention(new AttentionConfig("kv")), kv, 2);
        build(attention(new AttentionConfig("kv")), kv, 2);

        assertThat(kv.config().numKvHeads()).isEqualTo(2);
    }

    @Test
    void crossAndRaggedSpecsBuildTheirManagers() {
        RaggedAttentionConfig ragged = new RaggedAttentionConfig(4, 2, 64, null, 1, null, RaggedAttnBackend.AUTO);

        assertThat(build(new CrossAttentionSpec("cross", Set.of("llm"), new CrossAttentionConfig("kv")),
                pagedKv(KVLayout.NHD), 1)).isInstanceOf(CrossAttentionManager.class);
        assertThat(build(new RaggedAttentionSpec("ragged", Set.of("llm"), ragged), null, 2))
                .isInstanceOfSatisfying(RaggedAttentionManager.class, m -> {
                    assertThat(m.kind()).isEqualTo(RaggedAttentionManager.Kind.SELF);
                    assertThat(m.qoHeads()).isEqualTo(2);
                    assertThat(m.kvHeads()).isEqualTo(1);
                });
        assertThat(build(new RaggedCrossAttentionSpec("ragged", Set.of("llm"), ragged), null, 1))
                .isInstanceOfSatisfying(RaggedAttentionManager.class,
                        m -> assertThat(m.kind()).isEqualTo(RaggedAttentionManager.Kind.CROSS));
        assertThat(build(new RaggedBlockCausalAttentionSpec("ragged", Set.of("llm"), ragged, 16), null, 1))
                .isInstanceOfSatisfying(RaggedAttentionManager.class,
                        m -> assertThat(m.kind()).isEqualTo(RaggedAttentionManager.Kind.BLOCK_CAUSAL));
    }

    @Test
    void crossAttentionRefusesAContextOutsideAPagedNhdCache() {
        CrossAttentionSpec cross = new CrossAttentionSpec("cross", Set.of("llm"), new CrossAttentionConfig("kv"));

        assertThatThrownBy(() -> build(cross, null, 1)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("needs KV spec 'kv'");
        assertThatThrownBy(() -> build(cross, pagedKv(KVLayout.MLA), 1))
                .isInstanceOf(UnsupportedOperationException.class).hasMessageContaining("paged NHD KV cache");
    }

    @Test
    void raggedAttentionRefusesHeadsThatDoNotSplitOverTheRanks() {
        RaggedAttentionConfig ragged = new RaggedAttentionConfig(6, 3, 64, null, 1, null, RaggedAttnBackend.AUTO);

        assertThatThrownBy(() -> build(new RaggedAttentionSpec("ragged", Set.of("llm"), ragged), null, 2))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("do not split over 2 ranks");
    }
}
