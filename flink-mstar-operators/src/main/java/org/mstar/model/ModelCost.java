package org.mstar.model;

import org.mstar.device.DType;

/**
 * The least work a Llama-family forward must do, for bounds that measured times are read against: bytes of
 * weights and of KV it must read, FLOPs it must compute (bf16 storage).
 */
public final class ModelCost {
    private ModelCost() {}

    /** Bytes of every weight a forward reads: all but an untied embedding table, of which it gathers rows. */
    public static double weightBytes(ModelConfig c) {
        return (c.numLayers() * (double) linearParamsPerLayer(c) + (double) c.vocabSize() * c.hiddenSize())
                * DType.BF16.bytes();
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
        return 2.0 * c.numLayers() * linearParamsPerLayer(c) * tokens + 2.0 * c.vocabSize() * c.hiddenSize() * sampled
                + c.numLayers() * c.numHeads() * perKey * attendedKeys;
    }

    private static long linearParamsPerLayer(ModelConfig c) {
        long mlp = 3L * c.hiddenSize() * c.intermediateSize();
        if (c.latentAttention().isPresent()) {
            LatentAttention m = c.latentAttention().get();
            long h = c.hiddenSize();
            long q = (long) c.numHeads() * m.qkHeadDim();
            long query = m.qLoraRank() > 0 ? h * m.qLoraRank() + m.qLoraRank() * q : h * q;
            return query + h * m.latentDim() + (long) m.kvLoraRank() * c.numHeads() * (m.qkNopeHeadDim() + m.vHeadDim())
                    + (long) c.numHeads() * m.vHeadDim() * h + mlp;
        }
        return (long) c.hiddenSize() * (c.numHeads() + 2L * c.numKvHeads()) * c.headDim()
                + (long) c.numHeads() * c.headDim() * c.hiddenSize() + mlp;
    }
}
