package org.mstar.resources;

import java.util.Map;
import java.util.Set;

/** Fixed-size pages, appended to as a sequence grows. The default KV storage. */
public final class PagedKVConfig extends KVConfig {
    private static final Set<String> TUNABLES = Set.of("max_num_pages", "page_size", "max_seq_len",
            "cpu_offload_pages", "prefix_cache_salt", "prefix_cache", "prefix_cache_tp", "cache_dtype");

    private int maxSeqLen;
    private int maxNumPages;
    private int pageSize;
    private final KVLayout layout;
    private int cpuOffloadPages;
    private String prefixCacheSalt;
    private boolean prefixCache;
    private boolean prefixCacheTp;
    private final Integer kvLoraRank;
    private final Integer qkRopeHeadDim;
    private KVCacheDType cacheDType;

    private PagedKVConfig(Builder b) {
        super(b.numLayers, b.numKvHeads, b.headDim, b.numQoHeads);
        this.maxSeqLen = b.maxSeqLen;
        this.maxNumPages = b.maxNumPages;
        this.pageSize = b.pageSize;
        this.layout = b.layout;
        this.cpuOffloadPages = b.cpuOffloadPages;
        this.prefixCacheSalt = b.prefixCacheSalt;
        this.prefixCache = b.prefixCache;
        this.prefixCacheTp = b.prefixCacheTp;
        this.kvLoraRank = b.kvLoraRank;
        this.qkRopeHeadDim = b.qkRopeHeadDim;
        this.cacheDType = b.cacheDType;
        check();
    }

    private void check() {
        if (maxSeqLen <= 0) throw new IllegalArgumentException("max_seq_len must be > 0, got " + maxSeqLen);
        if (pageSize <= 0) throw new IllegalArgumentException("page_size must be > 0, got " + pageSize);
        if (maxNumPages < 2) throw new IllegalArgumentException("max_num_pages must be >= 2 (page 0 is the sink), got " + maxNumPages);
        if (cpuOffloadPages < 0) throw new IllegalArgumentException("cpu_offload_pages must be >= 0, got " + cpuOffloadPages);
        if (cacheDType != KVCacheDType.AUTO && layout == KVLayout.MLA) {
            // the latent attention kernels read their pool in the model's dtype
            throw new IllegalArgumentException("KV cache dtype " + cacheDType.optionValue()
                    + " does not cover latent (MLA) pages: use 'auto'");
        }
    }

    public static Builder builder(int numLayers, int numKvHeads, int headDim, int maxSeqLen) {
        return new Builder(numLayers, numKvHeads, headDim, maxSeqLen);
    }

    public int maxSeqLen() { return maxSeqLen; }
    public int maxNumPages() { return maxNumPages; }
    public int pageSize() { return pageSize; }
    public KVLayout layout() { return layout; }
    public int cpuOffloadPages() { return cpuOffloadPages; }
    public String prefixCacheSalt() { return prefixCacheSalt; }
    public boolean prefixCache() { return prefixCache; }
    public boolean prefixCacheTp() { return prefixCacheTp; }
    public Integer kvLoraRank() { return kvLoraRank; }
    public Integer qkRopeHeadDim() { return qkRopeHeadDim; }
    /** What the pool stores K and V in. */
    public KVCacheDType cacheDType() { return cacheDType; }

    /** Per-token cache width under MLA. */
    public int latentDim() {
        if (layout != KVLayout.MLA || kvLoraRank == null || qkRopeHeadDim == null) {
            throw new IllegalStateException("latentDim needs layout MLA with kv_lora_rank and qk_rope_head_dim");
        }
        return kvLoraRank + qkRopeHeadDim;
    }

    /** How much cache this deployment gets and how it is cut up; geometry is the checkpoint's. */
    @Override
    public void applyYamlOverrides(Map<String, Object> o) {
        YamlValues.refuseUnknown("PagedKVConfig", o, TUNABLES);
        if (o.containsKey("max_num_pages")) maxNumPages = YamlValues.asInt("max_num_pages", o.get("max_num_pages"));
        if (o.containsKey("page_size")) pageSize = YamlValues.asInt("page_size", o.get("page_size"));
        if (o.containsKey("max_seq_len")) maxSeqLen = YamlValues.asInt("max_seq_len", o.get("max_seq_len"));
        if (o.containsKey("cpu_offload_pages")) cpuOffloadPages = YamlValues.asInt("cpu_offload_pages", o.get("cpu_offload_pages"));
        if (o.containsKey("prefix_cache_salt")) prefixCacheSalt = YamlValues.asString("prefix_cache_salt", o.get("prefix_cache_salt"));
        if (o.containsKey("prefix_cache")) prefixCache = YamlValues.asBool("prefix_cache", o.get("prefix_cache"));
        if (o.containsKey("prefix_cache_tp")) prefixCacheTp = YamlValues.asBool("prefix_cache_tp", o.get("prefix_cache_tp"));
        if (o.containsKey("cache_dtype")) cacheDType = KVCacheDType.parse(YamlValues.asString("cache_dtype", o.get("cache_dtype")));
        check();
    }

    public static final class Builder {
        private final int numLayers;
        private final int numKvHeads;
        private final int headDim;
        private final int maxSeqLen;
        private Integer numQoHeads;
        private int maxNumPages = 2048;
        private int pageSize = 128;
        private KVLayout layout = KVLayout.NHD;
        private int cpuOffloadPages = 0;
        private String prefixCacheSalt = "";
        private boolean prefixCache = true;
        private boolean prefixCacheTp = false;
        private Integer kvLoraRank;
        private Integer qkRopeHeadDim;
        private KVCacheDType cacheDType = KVCacheDType.AUTO;

        private Builder(int numLayers, int numKvHeads, int headDim, int maxSeqLen) {
            this.numLayers = numLayers;
            this.numKvHeads = numKvHeads;
            this.headDim = headDim;
            this.maxSeqLen = maxSeqLen;
        }

        public Builder numQoHeads(int v) { numQoHeads = v; return this; }
        public Builder maxNumPages(int v) { maxNumPages = v; return this; }
        public Builder pageSize(int v) { pageSize = v; return this; }
        public Builder layout(KVLayout v) { layout = v; return this; }
        public Builder cpuOffloadPages(int v) { cpuOffloadPages = v; return this; }
        public Builder prefixCacheSalt(String v) { prefixCacheSalt = v; return this; }
        public Builder prefixCache(boolean v) { prefixCache = v; return this; }
        public Builder prefixCacheTp(boolean v) { prefixCacheTp = v; return this; }
        public Builder kvLoraRank(int v) { kvLoraRank = v; return this; }
        public Builder qkRopeHeadDim(int v) { qkRopeHeadDim = v; return this; }
        public Builder cacheDType(KVCacheDType v) { cacheDType = v; return this; }

        public PagedKVConfig build() { return new PagedKVConfig(this); }
    }
}
