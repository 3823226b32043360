package org.mstar.device;

/**
 * Ops that a device may run as one launch where the unfused sequence costs more in launches than in work (decode
 * steps of few rows); each is defined as the sequence of other families' ops it replaces. One family of {@link
 * ComputeOps}.
 */
public interface FusedDecodeOps {

    /**
     * The gate/up projection and its gated activation in one op: {@code out[n, I] = act(x · gateᵀ) · (x · upᵀ)} with
     * {@code gateUpWeight [2I, K]} (gate rows, then up rows, as the fused MLP weight stores them) and act SiLU, or
     * PyTorch's tanh-approximated GELU when {@code geluTanh} is set. Equal to {@link ProjectionOps#matmul} into {@code
     * gateUp [n, 2I]} (out's dtype) followed by {@link ElementwiseOps#siluMul} or {@link ElementwiseOps#geluTanhMul}:
     * the gate and up sums are rounded to out's dtype before the activation. {@code gateUp} is the caller's buffer for
     * that intermediate; a device may skip it (CUDA can for a few rows, where the activation's own launch costs as much
     * as its work), so its contents afterwards are unspecified.
     */
    void gateUpActivation(Tensor x, Tensor gateUpWeight, boolean geluTanh, Tensor gateUp, Tensor out);

    /**
     * The fused qkv projection and {@link KvCacheOps#qkvRopeAppend} in one op: equal to {@link ProjectionOps#matmul} of
     * {@code x [n, K]} with {@code qkvWeight [(qHeads + 2·kvHeads)·headDim, K]} and {@code qkvBias} (or null) into
     * {@code qkv [n, (qHeads + 2·kvHeads)·headDim]}, followed by {@link KvCacheOps#qkvRopeAppend} of it with the same
     * arguments. {@code qkv} is the caller's buffer for that intermediate; a device may skip it (CUDA can for a few
     * rows), so its contents afterwards are unspecified.
     */
    void qkvProjectionRopeAppend(Tensor x, Tensor qkvWeight, Tensor qkvBias, Tensor qkv, Tensor posIds,
            RopeParams params, Tensor pool, int layer, Tensor pageIdx, Tensor offsets, Tensor q);
}
