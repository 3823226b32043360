// RMSNorm over the last dim, optionally fused with the residual add.
#include "common.cuh"

using namespace mstar;

// Elements of a row one thread holds in registers: the launcher gives a row at most this many per thread.
constexpr int kNormPerThread = 8;

// One block per row. With a residual: residual += x (rounded to the residual's dtype) and the stored sum is
// normalised, so the output matches a separate add followed by a norm. The reciprocal root is taken in
// double like the CPU reference; the sum of squares is fp32 in tree order. Every load of a thread is issued
// before its first store: the buffers do not overlap, but the compiler cannot know, and a load stuck behind
// the store before it costs a memory round trip per element.
__device__ __forceinline__ void rms_norm_any(const void* x, int xDt, void* residual, int resDt, const void* weight,
                                              int wDt, void* out, int outDt, int hidden, float eps) {
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

// The bf16 path: each thread holds 8 consecutive elements, moved with one 16-byte load or store per tensor (a
// thread per strided element issues eight times the instructions, and at a few hundred rows a step the
// kernel is bound by their latency). Thread t's eight squares are summed first, then across the block.
__device__ __forceinline__ void rms_norm_bf16(const uint4* x, uint4* residual, const uint4* weight, uint4* out,
                                              int hidden, float eps) {
    __shared__ float scratch[32];
    __shared__ float invShared;
    const int vecs = hidden / 8;
    const long long v = (long long)blockIdx.x * vecs + threadIdx.x;
    const bool live = threadIdx.x < vecs;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    const uint4 xv = live ? x[v] : zero, wv = live ? weight[threadIdx.x] : zero;
    const uint4 rv = live && residual != nullptr ? residual[v] : zero;
    const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(&xv);
    const __nv_bfloat162* r2 = reinterpret_cast<const __nv_bfloat162*>(&rv);
    const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&wv);
    float a[8];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float2 xf = __bfloat1622float2(x2[j]);
        a[2 * j] = xf.x;
        a[2 * j + 1] = xf.y;
    }
    if (residual != nullptr) {
        uint4 sum;
        __nv_bfloat162* s2 = reinterpret_cast<__nv_bfloat162*>(&sum);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float2 rf = __bfloat1622float2(r2[j]);
            s2[j] = __floats2bfloat162_rn(rf.x + a[2 * j], rf.y + a[2 * j + 1]);
            const float2 sf = __bfloat1622float2(s2[j]);
            a[2 * j] = sf.x;
            a[2 * j + 1] = sf.y;
        }
        if (live) residual[v] = sum;
    }
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += a[j] * a[j];
    ss = block_sum(ss, scratch);
    if (threadIdx.x == 0) invShared = (float)(1.0 / sqrt((double)(ss / (float)hidden + eps)));
    __syncthreads();
    const float inv = invShared;
    uint4 ov;
    __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&ov);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float2 wf = __bfloat1622float2(w2[j]);
        o2[j] = __floats2bfloat162_rn(a[2 * j] * inv * wf.x, a[2 * j + 1] * inv * wf.y);
    }
    if (live) out[v] = ov;
}

extern "C" __global__ void rms_norm(const void* x, int xDt, void* residual, int resDt, const void* weight, int wDt,
                                    void* out, int outDt, int hidden, float eps) {
    mstar::await_previous_kernel();
    const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(residual)
                           | reinterpret_cast<uintptr_t>(weight) | reinterpret_cast<uintptr_t>(out)) & 15) == 0;
    if (xDt == DT_BF16 && wDt == DT_BF16 && outDt == DT_BF16 && (residual == nullptr || resDt == DT_BF16)
        && hidden % 8 == 0 && hidden / 8 <= (int)blockDim.x && aligned) {
        rms_norm_bf16(static_cast<const uint4*>(x), static_cast<uint4*>(residual), static_cast<const uint4*>(weight),
                      static_cast<uint4*>(out), hidden, eps);
    } else {
        rms_norm_any(x, xDt, residual, resDt, weight, wDt, out, outDt, hidden, eps);
    }
}
