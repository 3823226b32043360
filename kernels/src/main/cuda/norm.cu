// RMSNorm over the last dim, optionally fused with the residual add.
#include "common.cuh"

using namespace mstar;

// Elements of a row one thread holds in registers: the launcher gives a row at most this many per thread.
constexpr int kNormPerThread = 8;

// rms_norm's element access: every tensor bf16 (decode's case: plain typed loads, which the compiler issues back to
// back) or each tensor of its own dtype (load_f's switch per element, a branch the loads cannot be batched across).
struct Bf16Elements {
    __device__ static float load(const void* p, int, long long i) {
        return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    }
    __device__ static void store(void* p, int, long long i, float v) {
        static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
    }
    __device__ static float round(int, float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
};

struct AnyElements {
    __device__ static float load(const void* p, int dt, long long i) { return load_f(p, dt, i); }
    __device__ static void store(void* p, int dt, long long i, float v) { store_f(p, dt, i, v); }
    __device__ static float round(int dt, float v) { return round_to(dt, v); }
};

// One block per row. With a residual: residual += x (rounded to the residual's dtype) and the stored sum is
// normalised, so the output matches a separate add followed by a norm. The reciprocal root is taken in
// double like the CPU reference; the sum of squares is fp32 in tree order. Every load of a thread is issued
// before its first store: the buffers do not overlap, but the compiler cannot know, and a load stuck behind
// the store before it costs a memory round trip per element.
template <class E>
__device__ __forceinline__ void rms_norm_body(const void* x, int xDt, void* residual, int resDt, const void* weight,
                                              int wDt, void* out, int outDt, int hidden, float eps) {
    __shared__ float scratch[32];
    __shared__ float invShared;
    const long long base = (long long)blockIdx.x * hidden;
    float a[kNormPerThread], w[kNormPerThread];
#pragma unroll
    for (int j = 0; j < kNormPerThread; ++j) {
        const int h = threadIdx.x + j * blockDim.x;
        a[j] = h < hidden ? E::load(x, xDt, base + h) : 0.f;
        w[j] = h < hidden ? E::load(weight, wDt, h) : 0.f;
    }
    if (residual != nullptr) {
        float r[kNormPerThread];
#pragma unroll
        for (int j = 0; j < kNormPerThread; ++j) {
            const int h = threadIdx.x + j * blockDim.x;
            r[j] = h < hidden ? E::load(residual, resDt, base + h) : 0.f;
        }
#pragma unroll
        for (int j = 0; j < kNormPerThread; ++j) {
            const int h = threadIdx.x + j * blockDim.x;
            a[j] = E::round(resDt, r[j] + a[j]);
            if (h < hidden) E::store(residual, resDt, base + h, a[j]);
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
        if (h < hidden) E::store(out, outDt, base + h, a[j] * inv * w[j]);
    }
}

extern "C" __global__ void rms_norm(const void* x, int xDt, void* residual, int resDt, const void* weight, int wDt,
                                    void* out, int outDt, int hidden, float eps) {
    mstar::await_previous_kernel();
    if (xDt == DT_BF16 && wDt == DT_BF16 && outDt == DT_BF16 && (residual == nullptr || resDt == DT_BF16)) {
        rms_norm_body<Bf16Elements>(x, xDt, residual, resDt, weight, wDt, out, outDt, hidden, eps);
    } else {
        rms_norm_body<AnyElements>(x, xDt, residual, resDt, weight, wDt, out, outDt, hidden, eps);
    }
}
