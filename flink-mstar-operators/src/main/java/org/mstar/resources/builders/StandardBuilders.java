package org.mstar.resources.builders;

import org.mstar.resources.AdapterSpec;
import org.mstar.resources.AttentionSpec;
import org.mstar.resources.CrossAttentionSpec;
import org.mstar.resources.KVSpec;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PositionSpec;
import org.mstar.resources.RaggedAttentionSpec;
import org.mstar.resources.RaggedBlockCausalAttentionSpec;
import org.mstar.resources.RaggedCrossAttentionSpec;
import org.mstar.resources.RecurrentStateSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.RingKVConfig;
import org.mstar.resources.SamplerSpec;
import org.mstar.resources.attn.AttentionManagerBuilder;
import org.mstar.resources.attn.CrossAttentionManagerBuilder;
import org.mstar.resources.attn.RaggedAttentionManagerBuilder;
import org.mstar.resources.kv.KVManagerBuilder;
import org.mstar.resources.lora.AdapterManagerBuilder;
import org.mstar.resources.kv.ring.RingKVManagerBuilder;
import org.mstar.resources.position.RopeManagerBuilder;
import org.mstar.resources.recurrent.RecurrentStateManagerBuilder;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceBuilders;
import org.mstar.resources.sampler.SamplerResourceBuilder;

/**
 * The builder of every spec type the library declares. Apart from the declarations and the runner, so that
 * neither depends on the managers.
 */
public final class StandardBuilders {
    private static final RingKVManagerBuilder RING = new RingKVManagerBuilder();
    private static final KVManagerBuilder PAGED = new KVManagerBuilder();
    private static final RaggedAttentionManagerBuilder RAGGED = new RaggedAttentionManagerBuilder();

    private StandardBuilders() {}

    public static ResourceBuilders all() {
        return ResourceBuilders.none()
                .with(KVSpec.class, StandardBuilders::kv)
                .with(AttentionSpec.class, new AttentionManagerBuilder())
                .with(CrossAttentionSpec.class, new CrossAttentionManagerBuilder())
                .with(RaggedAttentionSpec.class, RAGGED)
                .with(RaggedCrossAttentionSpec.class, RAGGED)
                .with(RaggedBlockCausalAttentionSpec.class, RAGGED)
                .with(PositionSpec.class, new RopeManagerBuilder())
                .with(SamplerSpec.class, new SamplerResourceBuilder())
                .with(AdapterSpec.class, new AdapterManagerBuilder())
                .with(RecurrentStateSpec.class, new RecurrentStateManagerBuilder());
    }

    /** A KV cache is built by its storage strategy: a ring of frames, or pages. */
    private static Resource kv(NodeResourceSpec spec, EngineResourceInfo info) {
        return ((KVSpec) spec).config() instanceof RingKVConfig ? RING.build(spec, info) : PAGED.build(spec, info);
    }
}
