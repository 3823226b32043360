package org.mstar.model.llama;

import java.util.Objects;
import org.mstar.resources.KVCacheDType;

/**
 * How much KV cache a deployment gives the model and how it is cut up; build one with {@link #builder()}. The
 * compact constructor is the one place these are checked, so every engine and model sees options that passed it.
 *
 * @param maxSeqLen longest sequence (prompt + generated) a request may reach; at most the model's context
 * @param maxNumPages device pages, page 0 being the sink
 * @param pageSize tokens per page
 * @param cpuOffloadPages host pages for preempted requests (0: preemption frees and recomputes instead)
 * @param prefixCache whether full prompt pages are shared across requests
 * @param windowedLayerPages pages of a separate cache for the sliding-window layers of a model that also has global
 *     layers (Gemma 3), where each request keeps only its window (FIFO retention); page 0 is its sink. A model whose
 *     every layer is windowed (Mistral, Phi-3) has no second cache: any value here puts its one cache under that
 *     retention. 0 = windowed layers keep every token. Needs the prefix cache off: its shared pages would hold no
 *     windowed layers, and a retained stream indexes none
 * @param cacheDType what the pages store K and V in: the model's dtype, or FP8 E4M3 codes (half the bytes a token
 *     of bf16 pages)
 */
public record KvCacheOptions(int maxSeqLen, int maxNumPages, int pageSize, int cpuOffloadPages, boolean prefixCache,
                             int windowedLayerPages, KVCacheDType cacheDType) {
    public KvCacheOptions {
        Objects.requireNonNull(cacheDType, "cacheDType");
        if (maxSeqLen < 1 || maxNumPages < 2 || pageSize < 1 || cpuOffloadPages < 0) {
            throw new IllegalArgumentException("invalid KV cache options " + maxSeqLen + "/" + maxNumPages + "/"
                    + pageSize + "/" + cpuOffloadPages);
        }
        if (windowedLayerPages == 1 || windowedLayerPages < 0) {
            throw new IllegalArgumentException("windowed-layer pages must be 0 (none) or >= 2, got " + windowedLayerPages);
        }
        if (windowedLayerPages > 0 && prefixCache) {
            throw new IllegalArgumentException("a separate windowed-layer cache needs the prefix cache off");
        }
    }

    /**
     * Options that set {@code maxSeqLen} and {@code maxNumPages}; the rest default to the deployment's defaults
     * ({@code mstar.kv.*}): pages of 16 tokens, no host pages, the prefix cache on, one cache for every layer, pages in
     * the model's dtype.
     */
    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding these options, to build options that differ in some. */
    public Builder toBuilder() {
        return builder().maxSeqLen(maxSeqLen).maxNumPages(maxNumPages).pageSize(pageSize)
                .cpuOffloadPages(cpuOffloadPages).prefixCache(prefixCache).windowedLayerPages(windowedLayerPages)
                .cacheDType(cacheDType);
    }

    /** These options with a separate cache of {@code pages} pages for the windowed layers (prefix cache off). */
    public KvCacheOptions withWindowedLayerPages(int pages) {
        return toBuilder().prefixCache(false).windowedLayerPages(pages).build();
    }

    /** Names each option at its call site; {@link #build()} refuses options that leave a size unset. */
    public static final class Builder {
        private int maxSeqLen;
        private int maxNumPages;
        private int pageSize = 16;
        private int cpuOffloadPages;
        private boolean prefixCache = true;
        private int windowedLayerPages;
        private KVCacheDType cacheDType = KVCacheDType.AUTO;

        private Builder() {
        }

        public Builder maxSeqLen(int tokens) {
            this.maxSeqLen = tokens;
            return this;
        }

        public Builder maxNumPages(int pages) {
            this.maxNumPages = pages;
            return this;
        }

        public Builder pageSize(int tokens) {
            this.pageSize = tokens;
            return this;
        }

        public Builder cpuOffloadPages(int pages) {
            this.cpuOffloadPages = pages;
            return this;
        }

        public Builder prefixCache(boolean on) {
            this.prefixCache = on;
            return this;
        }

        public Builder windowedLayerPages(int pages) {
            this.windowedLayerPages = pages;
            return this;
        }

        public Builder cacheDType(KVCacheDType dtype) {
            this.cacheDType = dtype;
            return this;
        }

        /** @throws IllegalArgumentException for sizes out of range or a combination that cannot work */
        public KvCacheOptions build() {
            return new KvCacheOptions(maxSeqLen, maxNumPages, pageSize, cpuOffloadPages, prefixCache,
                    windowedLayerPages, cacheDType);
        }
    }
}
