// RMSNorm over the last dim, optionally fused with the residual add.
#include "common.cuh"

using namespace mstar;

// Elements of a row one thread holds in registers: the launcher gives a row at most this many per thread.
constexpr int kNormPerThread = 16;

// One block per row. With a residual: residual += x (rounded to the residual's dtype) and the stored sum is
// normalised, so the output matches a separate add followed by a norm. The reciprocal root is taken in
// double like the CPU reference; the sum of squares is fp32 in tree order. Every load of a thread is issued
// before its first store: the buffers do not overlap, but the compiler cannot know, and a load stuck behind
// the store before it costs a memory round trip per element.
extern "C" __global__ void rms_norm(const void* x, int xDt, void* residual, int resDt, const void* weight, int wDt,
                                    void* out, int outDt, int hidden, float eps) {
    mstar::await_previous_kernel();
    __shared__ float scratch[32];
    __shared__ float invShared;
    const long long base = (long long)blockIdx.x * hidden;
    float a[kNormPerThread], w[kNormPerThread];
#pragma unroll
    for (int j = 0; j < kNormPerThread; ++j) {
        const int h = threadIdx.x + j * blockDim.x;
        a[j] = h < hidden ? load_f(x, xDt, base + h) : 0.f;
        w[j] = h < hidden ? load_f(weight, wDt, h) : 0.f;
    }
    if (residual != nullptr) {
        float r[kNormPerThread];
#pragma unroll
        for (int j = 0; j < kNormPerThread; ++j) {
            const int h = threadIdx.x + j * blockDim.x;
            r[j] = h < hidden ? load_f(residual, resDt, base + h) : 0.f;
        }
#pragma unroll
        for (int j = 0; j < kNormPerThread; ++j) {
            const int h = threadIdx.x + j * blockDim.x;
            a[j] = round_to(resDt, r[j] + a[j]);
            if (h < hidden) store_f(residual, resDt, base + h, a[j]);
        }
    }
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < kNormPerThread; ++j) ss += a[j] * a[j];  // past the row: zeros, added last
    ss = block_sum(ss, scratch);
    if (threadIdx.x == 0) invShared = (float)(1.0 / sqrt((double)(ss / (float)hidden + eps)));
    __syncthreads();
    const float inv = invShared;
#pragma unroll
    for (int j = 0; j < kNormPerThread; ++j) {
        const int h = threadIdx.x + j * blockDim.x;
        if (h < hidden) store_f(out, outDt, base + h, a[j] * inv * w[j]);
    }
}
