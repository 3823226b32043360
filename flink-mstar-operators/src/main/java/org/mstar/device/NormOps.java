package org.mstar.device;

/**
 * Row normalisations, each optionally fused with the residual add before it. One family of {@link ComputeOps}.
 */
public interface NormOps {

    /**
     * RMSNorm over the last dim: {@code out = x / sqrt(mean(x²) + eps) * weight}; {@code out} may be {@code x} when
     * there is no residual (per-head q/k norms run in place over {@code [n·heads, headDim]}). With a non-null
     * {@code residual} (fused add, F32 or the activation dtype) it first does {@code residual += x} and
     * normalises the sum: {@code out = norm(residual)}. {@code out} may be {@link Fp8Rows}: each row's fp32 result
     * is then quantised with its own scale ({@link Fp8Rows#quantise}), the input of a W8A8 product.
     */
    void rmsNorm(Tensor x, Tensor residual, Tensor weight, float eps, Tensor out);

    /**
     * LayerNorm over the last dim, as PyTorch's {@code nn.LayerNorm}: {@code out = (x − mean) / sqrt(var + eps) ·
     * weight + bias} with the biased variance of each row; {@code bias} may be null (no shift). {@code out} may be
     * {@code x} when there is no residual. With a non-null {@code residual} it first does {@code residual += x},
     * rounded to the residual's dtype, and normalises the sum ({@code out = norm(residual)}), as {@link #rmsNorm}
     * does. weight and bias {@code [hidden]}; x, residual and out {@code [rows, hidden]} (any leading shape).
     */
    void layerNorm(Tensor x, Tensor residual, Tensor weight, Tensor bias, float eps, Tensor out);
}
