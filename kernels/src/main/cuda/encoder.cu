// Encoder-side ops of encoder-decoder models (Whisper): LayerNorm, exact GELU, and the im2col that turns a
// frames-major conv1d into one cuBLAS GEMM.
#include "common.cuh"

using namespace mstar;

// Elements of a row one thread holds in registers: the launcher gives a row at most this many per thread.
constexpr int kLayerNormPerThread = 8;

// One block per row; nn.LayerNorm with the biased variance. With a residual: residual += x (rounded to the
// residual's dtype) and the stored sum is normalised, as rms_norm does. Mean and variance are two fp32 block
// sums (the variance of centred values does not cancel); the reciprocal root is taken in double like the CPU
// reference. The row stays in registers and every load of a thread (x, residual, weight, bias) is issued
// before its first store: a load the compiler must keep behind a store (the buffers may alias, as far as it
// knows) costs a memory round trip per element, which made this kernel take 13 us for one 1280-wide row.
// out may be x when there is no residual.
extern "C" __global__ void layer_norm(const void* x, int xDt, void* residual, int resDt, const void* weight, int wDt,
                                      const void* bias, int bDt, void* out, int outDt, int hidden, float eps) {
    mstar::await_previous_kernel();
    __shared__ float scratch[32];
    __shared__ float invShared;
    const long long base = (long long)blockIdx.x * hidden;
    float a[kLayerNormPerThread], w[kLayerNormPerThread], b[kLayerNormPerThread];
#pragma unroll
    for (int j = 0; j < kLayerNormPerThread; ++j) {
        const int h = threadIdx.x + j * blockDim.x;
        a[j] = h < hidden ? load_f(x, xDt, base + h) : 0.f;
        w[j] = h < hidden ? load_f(weight, wDt, h) : 0.f;
        b[j] = h < hidden && bias != nullptr ? load_f(bias, bDt, h) : 0.f;
    }
    if (residual != nullptr) add_residual_row(a, residual, resDt, base, hidden);
    // each thread sums its elements in increasing h, as a loop over the row would
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < kLayerNormPerThread; ++j) {
        if (threadIdx.x + j * blockDim.x < hidden) s += a[j];
    }
    const float mean = block_sum(s, scratch) / (float)hidden;
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < kLayerNormPerThread; ++j) {
        const float d = a[j] - mean;
        if (threadIdx.x + j * blockDim.x < hidden) ss += d * d;
    }
    ss = block_sum(ss, scratch);
    if (threadIdx.x == 0) invShared = (float)(1.0 / sqrt((double)(ss / (float)hidden + eps)));
    __syncthreads();
    const float inv = invShared;
#pragma unroll
    for (int j = 0; j < kLayerNormPerThread; ++j) {
        const int h = threadIdx.x + j * blockDim.x;
        if (h < hidden) store_f(out, outDt, base + h, (a[j] - mean) * inv * w[j] + b[j]);
    }
}

// out = x · Φ(x), the erf GELU; normcdff keeps its relative accuracy on the negative tail, where
// 0.5·(1 + erf(x/√2)) cancels. out may be x.
extern "C" __global__ void gelu_exact(const void* x, int xDt, void* out, int outDt, long long n) {
    mstar::await_previous_kernel();
    MSTAR_GRID_LOOP(i, n) {
        const float v = load_f(x, xDt, i);
        store_f(out, outDt, i, v * normcdff(v));
    }
}

// cols[t, c·kernel + k] = x[t·stride + k − padding, c], zero outside the frames: row t of cols is output frame t's
// receptive field in the order of the flattened weight [outChannels, channels·kernel]. Values are copied exactly
// (cols has x's dtype).
extern "C" __global__ void conv1d_im2col(const void* x, int xDt, void* cols, int frames, int channels, int kernel,
                                         int stride, int padding, long long outFrames) {
    mstar::await_previous_kernel();
    const long long width = (long long)channels * kernel;
    MSTAR_GRID_LOOP(i, outFrames * width) {
        const long long t = i / width;
        const int j = (int)(i - t * width);
        const int c = j / kernel;
        const long long src = t * stride + (j - c * kernel) - padding;
        store_f(cols, xDt, i, (src >= 0 && src < frames) ? load_f(x, xDt, src * channels + c) : 0.f);
    }
}
