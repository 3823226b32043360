package org.mstar.model.llama;

import org.mstar.model.LatentAttention;
import org.mstar.model.ModelConfig;
import org.mstar.resources.KVLayout;
import org.mstar.resources.PagedKVConfig;

/**
 * The KV cache of a latent-attention model: MLA pages of {@code kv_lora_rank + qk_rope_head_dim} values per token and
 * layer, one shared "head" whose query width {@code qk_nope_head_dim + qk_rope_head_dim} gives the default softmax
 * scale; every head of the model reads it.
 */
public final class LatentKvConfig {
    private LatentKvConfig() {}

    public static PagedKVConfig of(ModelConfig config, KvCacheOptions kv, int layers, int pages, boolean prefixCache,
                            int offloadPages) {
        LatentAttention m = config.latentAttention().orElseThrow();
        return PagedKVConfig.builder(layers, 1, m.qkHeadDim(), kv.maxSeqLen())
                .numQoHeads(config.numHeads())
                .layout(KVLayout.MLA)
                .kvLoraRank(m.kvLoraRank())
                .qkRopeHeadDim(m.qkRopeHeadDim())
                .maxNumPages(pages)
                .pageSize(kv.pageSize())
                .cpuOffloadPages(offloadPages)
                .prefixCache(prefixCache)
                .cacheDType(kv.cacheDType())
                .build();
    }
}
