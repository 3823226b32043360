package org.mstar.resources;

/**
 * Cross-attention against a context written once and never extended. {@code kvCache} holds the
 * context under {@code contextLabel}; {@code queryKvCache} (nullable) is the KV resource whose plan
 * packs the queries, else the step's own segments do.
 */
public record CrossAttentionConfig(String kvCache, String queryKvCache, String contextLabel, AttnBackend backend,
                                   String flashinferBackend) {
    public CrossAttentionConfig(String kvCache) {
        this(kvCache, null, "context", AttnBackend.AUTO, "auto");
    }
}
