package org.mstar.device;

/**
 * Every compute op a model forward and the resources need, enqueued on the owning device's stream, in families
 * by what they do: {@link ProjectionOps}, {@link ElementwiseOps}, {@link NormOps}, {@link KvCacheOps},
 * {@link AttentionOps}, {@link LatentAttentionOps}, {@link SamplingOps}, {@link FusedDecodeOps}, {@link MoeOps} and
 * {@link StateSpaceOps}; a caller that needs one family can take just that one.
 * Two implementations: {@code org.mstar.device.cpu} (the readable reference, the CI path) and
 * {@code org.mstar.device.cuda}. All tensors of one call live on the same device.
 *
 * <p>Activations may be F32 or BF16 (outputs take the dtype of the {@code out} tensor); weights F32,
 * BF16 or F16. Arithmetic accumulates in fp32 and rounds once on store.
 *
 * <p>The KV pool is one tensor {@code [layers, pages, 2, pageSize, kvHeads, headDim]} (index 0 of the
 * third axis is K, 1 is V); a latent (MLA) pool has one plane there ({@link LatentAttentionOps}).
 */
public interface ComputeOps
        extends ProjectionOps, ElementwiseOps, NormOps, KvCacheOps, AttentionOps, LatentAttentionOps, SamplingOps,
        FusedDecodeOps, MoeOps, StateSpaceOps {
}
