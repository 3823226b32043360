// The gated MLP activations, one definition for the elementwise kernels and the skinny matmul's fused epilogue,
// so that both give the same bits.
#pragma once

namespace mstar {

// SiLU(g) · u.
__device__ __forceinline__ float silu_times(float g, float u) { return g / (1.f + expf(-g)) * u; }

// GELU(g) · u with PyTorch's tanh approximation (Gemma).
__device__ __forceinline__ float gelu_tanh_times(float g, float u) {
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    return 0.5f * g * (1.f + tanhf(k * (g + 0.044715f * g * g * g))) * u;
}

}  // namespace mstar
