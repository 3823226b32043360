// Encoder-side ops of encoder-decoder models (Whisper): LayerNorm, exact GELU, and the im2col that turns a
// frames-major conv1d into one cuBLAS GEMM.
#include "common.cuh"

using namespace mstar;

// One block per row; nn.LayerNorm with the biased variance. With a residual: residual += x (rounded to the
// residual's dtype) and the stored sum is normalised, as rms_norm does. Mean and variance are two fp32 block
// sums (the variance of centred values does not cancel); the reciprocal root is taken in double like the CPU
// reference. Each thread re-reads only elements it wrote itself, and out may be x when there is no residual:
// every read of x precedes the second block_sum's barriers.
extern "C" __global__ void layer_norm(const void* x, int xDt, void* residual, int resDt, const void* weight, int wDt,
                                      const void* bias, int bDt, void* out, int outDt, int hidden, float eps) {
    mstar::await_previous_kernel();
    __shared__ float scratch[32];
    __shared__ float invShared;
    const long long base = (long long)blockIdx.x * hidden;
    float s = 0.f;
    for (int h = threadIdx.x; h < hidden; h += blockDim.x) {
        float a = load_f(x, xDt, base + h);
        if (residual != nullptr) {
            a = round_to(resDt, load_f(residual, resDt, base + h) + a);
            store_f(residual, resDt, base + h, a);
        }
        s += a;
    }
    const float mean = block_sum(s, scratch) / (float)hidden;
    float ss = 0.f;
    for (int h = threadIdx.x; h < hidden; h += blockDim.x) {
        const float d = (residual != nullptr ? load_f(residual, resDt, base + h) : load_f(x, xDt, base + h)) - mean;
        ss += d * d;
    }
    ss = block_sum(ss, scratch);
    if (threadIdx.x == 0) invShared = (float)(1.0 / sqrt((double)(ss / (float)hidden + eps)));
    __syncthreads();
    const float inv = invShared;
    for (int h = threadIdx.x; h < hidden; h += blockDim.x) {
        const float a = residual != nullptr ? load_f(residual, resDt, base + h) : load_f(x, xDt, base + h);
        const float b = bias != nullptr ? load_f(bias, bDt, h) : 0.f;
        store_f(out, outDt, base + h, (a - mean) * inv * load_f(weight, wDt, h) + b);
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
