package org.mstar.resources;

/**
 * Varlen attention over segments packed into one forward, with no KV cache. Head counts are
 * pre-sharding.
 */
public record RaggedAttentionConfig(int numQoHeads, int numKvHeads, int headDim, Double smScale,
                                    int maxSegmentsPerRequest, Integer maxTokensPerRequest,
                                    RaggedAttnBackend backend) {
    public RaggedAttentionConfig {
        if (numQoHeads <= 0 || numKvHeads <= 0 || headDim <= 0) {
            throw new IllegalArgumentException("head counts and head_dim must be > 0");
        }
        if (maxSegmentsPerRequest < 1) {
            throw new IllegalArgumentException("max_segments_per_request must be >= 1");
        }
    }

    public int maxSegmentsFor(int bs) {
        return bs * maxSegmentsPerRequest;
    }

    public Integer maxTokensFor(int bs) {
        return maxTokensPerRequest == null ? null : bs * maxTokensPerRequest;
    }
}
