// RMSNorm over the last dim, optionally fused with the residual add.
#include "common.cuh"
#include "vec8.cuh"

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
    if (residual != nullptr) add_residual_row(a, residual, resDt, base, hidden);
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

__device__ __forceinline__ float rounded(const __nv_bfloat16*, float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
__device__ __forceinline__ float rounded(const float*, float v) { return v; }

// The path of bf16 weights and output (x and the residual bf16 or fp32: a bf16 model keeps its residual stream
// in fp32): each thread holds 8 consecutive elements, moved with 16-byte loads and stores (a thread per strided
// element issues eight times the instructions, and at a few hundred rows a step the kernel is bound by their
// latency). Thread t's eight squares are summed first, then across the block.
template <typename X, typename R>
__device__ __forceinline__ void rms_norm_vec(const X* x, R* residual, const __nv_bfloat16* weight,
                                             __nv_bfloat16* out, int hidden, float eps) {
    __shared__ float scratch[32];
    __shared__ float invShared;
    const int vecs = hidden / 8;
    const long long v = (long long)blockIdx.x * vecs + threadIdx.x;
    const bool live = threadIdx.x < vecs;
    float a[8] = {}, w[8] = {}, r[8] = {};
    if (live) {
        load8(x, v, a);
        load8(weight, threadIdx.x, w);
        if (residual != nullptr) load8(residual, v, r);
    }
    if (residual != nullptr) {
#pragma unroll
        for (int j = 0; j < 8; ++j) a[j] = rounded(residual, r[j] + a[j]);
        if (live) store8(residual, v, a);
    }
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += a[j] * a[j];
    ss = block_sum(ss, scratch);
    if (threadIdx.x == 0) invShared = (float)(1.0 / sqrt((double)(ss / (float)hidden + eps)));
    __syncthreads();
    const float inv = invShared;
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = a[j] * inv * w[j];
    if (live) store8(out, v, a);
}

extern "C" __global__ void rms_norm(const void* x, int xDt, void* residual, int resDt, const void* weight, int wDt,
                                    void* out, int outDt, int hidden, float eps) {
    mstar::await_previous_kernel();
    const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(residual)
                           | reinterpret_cast<uintptr_t>(weight) | reinterpret_cast<uintptr_t>(out)) & 15) == 0;
    const bool vec = wDt == DT_BF16 && outDt == DT_BF16 && hidden % 8 == 0 && hidden / 8 <= (int)blockDim.x && aligned;
    const auto* w16 = static_cast<const __nv_bfloat16*>(weight);
    auto* out16 = static_cast<__nv_bfloat16*>(out);
    if (vec && xDt == DT_BF16 && (residual == nullptr || resDt == DT_BF16)) {
        rms_norm_vec(static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(residual), w16, out16, hidden,
                     eps);
    } else if (vec && xDt == DT_BF16 && resDt == DT_F32) {
        rms_norm_vec(static_cast<const __nv_bfloat16*>(x), static_cast<float*>(residual), w16, out16, hidden, eps);
    } else if (vec && xDt == DT_F32 && residual == nullptr) {
        rms_norm_vec(static_cast<const float*>(x), static_cast<float*>(nullptr), w16, out16, hidden, eps);
    } else {
        rms_norm_any(x, xDt, residual, resDt, weight, wDt, out, outDt, hidden, eps);
    }
}
