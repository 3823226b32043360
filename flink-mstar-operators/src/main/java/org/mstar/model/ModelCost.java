package org.mstar.model;

import org.mstar.device.DType;

/**
 * The least work a Llama-family forward must do, for bounds that measured times are read against: bytes of
 * weights and of KV it must read, FLOPs it must compute (bf16 storage). A mixture of experts' layer reads only the
 * experts its rows are routed to and computes only their top-k.
 */
public final class ModelCost {
    private ModelCost() {}

    /** Bytes of every weight a forward may read: all but an untied embedding table, of which it gathers rows. */
    public static double weightBytes(ModelConfig c) {
        return weightBytesRead(c, Double.POSITIVE_INFINITY);
    }

    /**
     * Bytes of the weights a forward of {@code rows} rows reads: for a mixture of experts, each sparse layer reads
     * the experts its rows are routed to, counted as the expected number of distinct experts when each row picks its
     * top-k uniformly at random ({@code E · (1 − (1 − k/E)^rows)}); every other weight once.
     */
    public static double weightBytesRead(ModelConfig c, double rows) {
        double params = (double) c.vocabSize() * c.hiddenSize();
        for (int layer = 0; layer < c.numLayers(); layer++) {
            params += attentionParams(c) + mlpParams(c, layer, expertsRead(c, rows));
        }
        return params * DType.BF16.bytes();
    }

    /** KV bytes (K and V, or the latent rows) of one page of {@code pageSize} tokens over all layers, in {@code dtype}. */
    public static long kvPageBytes(ModelConfig c, int pageSize, DType dtype) {
        return (long) c.numLayers() * pageSize * c.kvValuesPerToken() * dtype.bytes();
    }

    /** KV bytes (K and V, or the latent row) of one token over all layers. */
    public static double kvBytesPerToken(ModelConfig c) {
        return (double) c.numLayers() * c.kvValuesPerToken() * DType.BF16.bytes();
    }

    /**
     * FLOPs of {@code tokens} tokens through the layers' projections, {@code sampled} rows through the LM head and
     * {@code attendedKeys} query-key pairs (summed over the queries) through attention's two products.
     */
    public static double flops(ModelConfig c, double tokens, double sampled, double attendedKeys) {
        // latent attention scores a whole latent row and sums its latent part, per head and key
        double perKey = c.latentAttention().map(m -> 2.0 * (m.latentDim() + m.kvLoraRank()))
                .orElse(4.0 * c.headDim());
        double perToken = 0;
        for (int layer = 0; layer < c.numLayers(); layer++) {
            // a routed token computes its top-k experts
            perToken += attentionParams(c) + mlpParams(c, layer, c.moe().map(m -> m.routing().topK()).orElse(0));
        }
        return 2.0 * perToken * tokens + 2.0 * c.vocabSize() * c.hiddenSize() * sampled
                + c.numLayers() * c.numHeads() * perKey * attendedKeys;
    }

    /** Expected distinct experts that {@code rows} rows route to in one sparse layer (0 without experts). */
    private static double expertsRead(ModelConfig c, double rows) {
        return c.moe().map(m -> {
            double e = m.numExperts();
            return Double.isInfinite(rows) ? e : e * (1 - Math.pow(1 - m.routing().topK() / e, rows));
        }).orElse(0.0);
    }

    /** The MLP's parameters in {@code layer}: dense, or the router, {@code experts} experts and the shared ones. */
    private static double mlpParams(ModelConfig c, int layer, double experts) {
        long h = c.hiddenSize();
        if (c.moe().isEmpty() || !c.moe().get().sparse(layer)) {
            return 3.0 * h * c.intermediateSize();
        }
        MoeConfig m = c.moe().get();
        return (double) h * m.numExperts() + experts * 3.0 * h * m.expertIntermediateSize()
                + 3.0 * h * m.sharedIntermediateSize();
    }

    private static long attentionParams(ModelConfig c) {
        if (c.latentAttention().isPresent()) {
            LatentAttention m = c.latentAttention().get();
            long h = c.hiddenSize();
            long q = (long) c.numHeads() * m.qkHeadDim();
            long query = m.qLoraRank() > 0 ? h * m.qLoraRank() + m.qLoraRank() * q : h * q;
            return query + h * m.latentDim() + (long) m.kvLoraRank() * c.numHeads() * (m.qkNopeHeadDim() + m.vHeadDim())
                    + (long) c.numHeads() * m.vHeadDim() * h;
        }
        return (long) c.hiddenSize() * (c.numHeads() + 2L * c.numKvHeads()) * c.headDim()
                + (long) c.numHeads() * c.headDim() * c.hiddenSize();
    }
}
