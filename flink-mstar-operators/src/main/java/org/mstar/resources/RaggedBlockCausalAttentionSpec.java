package org.mstar.resources;

import java.util.Map;
import java.util.Set;

/**
 * Cacheless block-causal self-attention: a token in block b of its span attends every key of blocks
 * 0..b. Declared with {@code AttentionStep(causal=false)}, since the block structure is the whole mask.
 */
public record RaggedBlockCausalAttentionSpec(String resourceKey, Set<String> nodes, RaggedAttentionConfig config,
                                             int blockSize) implements NodeResourceSpec {
    public RaggedBlockCausalAttentionSpec {
        nodes = Set.copyOf(nodes);
        if (blockSize <= 0) throw new IllegalArgumentException("block_size must be > 0, got " + blockSize);
    }

    @Override
    public void applyYamlOverrides(Map<String, Object> overrides) {
        YamlValues.refuseUnknown("RaggedBlockCausalAttentionSpec '" + resourceKey + "'", overrides, Set.of());
    }
}
