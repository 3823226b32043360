package org.mstar.model.llama;

/**
 * How much KV cache a deployment gives the model and how it is cut up.
 *
 * @param maxSeqLen longest sequence (prompt + generated) a request may reach; at most the model's context
 * @param maxNumPages device pages, page 0 being the sink
 * @param pageSize tokens per page
 * @param cpuOffloadPages host pages for preempted requests (0: preemption frees and recomputes instead)
 * @param prefixCache whether full prompt pages are shared across requests
 */
public record KvCacheOptions(int maxSeqLen, int maxNumPages, int pageSize, int cpuOffloadPages, boolean prefixCache) {
    public KvCacheOptions {
        if (maxSeqLen < 1 || maxNumPages < 2 || pageSize < 1 || cpuOffloadPages < 0) {
            throw new IllegalArgumentException("invalid KV cache options " + maxSeqLen + "/" + maxNumPages + "/"
                    + pageSize + "/" + cpuOffloadPages);
        }
    }
}
