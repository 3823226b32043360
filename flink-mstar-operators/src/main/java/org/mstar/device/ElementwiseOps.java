package org.mstar.device;

/**
 * Elementwise activations and arithmetic. One family of {@link ComputeOps}.
 */
public interface ElementwiseOps {

    /** {@code out = a + b}, elementwise, same shapes. */
    void add(Tensor a, Tensor b, Tensor out);

    /**
     * {@code out[n, I] = silu(gateUp[n, :I]) * gateUp[n, I:]}. {@code out} may be {@link Fp8Rows}: each row's fp32
     * result is then quantised with its own scale ({@link Fp8Rows#quantise}), the input of a W8A8 product.
     */
    void siluMul(Tensor gateUp, Tensor out);

    /**
     * {@code out[n, I] = geluTanh(gateUp[n, :I]) * gateUp[n, I:]}, with PyTorch's tanh approximation
     * {@code geluTanh(x) = 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³)))} (Gemma's MLP).
     */
    void geluTanhMul(Tensor gateUp, Tensor out);

    /** {@code out = x · factor}, elementwise, same sizes; {@code out} may be {@code x}. */
    void scale(Tensor x, float factor, Tensor out);

    /**
     * Exact (erf) GELU, elementwise: {@code out = x · Φ(x) = 0.5 · x · (1 + erf(x / √2))}, PyTorch's
     * {@code gelu(approximate="none")} and Hugging Face's {@code "gelu"} activation (not the tanh form of
     * {@link #geluTanhMul}). Same sizes; {@code out} may be {@code x}.
     */
    void gelu(Tensor x, Tensor out);
}
