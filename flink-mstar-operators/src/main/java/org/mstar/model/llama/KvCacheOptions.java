package org.mstar.model.llama;

/**
 * How much KV cache a deployment gives the model and how it is cut up.
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
 */
public record KvCacheOptions(int maxSeqLen, int maxNumPages, int pageSize, int cpuOffloadPages, boolean prefixCache,
                             int windowedLayerPages) {
    public KvCacheOptions {
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

    /** One cache for every layer. */
    public KvCacheOptions(int maxSeqLen, int maxNumPages, int pageSize, int cpuOffloadPages, boolean prefixCache) {
        this(maxSeqLen, maxNumPages, pageSize, cpuOffloadPages, prefixCache, 0);
    }

    /** These options with a separate cache of {@code pages} pages for the windowed layers (prefix cache off). */
    public KvCacheOptions withWindowedLayerPages(int pages) {
        return new KvCacheOptions(maxSeqLen, maxNumPages, pageSize, cpuOffloadPages, false, pages);
    }
}
