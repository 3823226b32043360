// RMSNorm over the last dim, optionally fused with the residual add.
#include "common.cuh"

using namespace mstar;

// One block per row. With a residual: residual += x (rounded to the residual's dtype) and the stored sum is
// normalised, so the output matches a separate add followed by a norm. The reciprocal root is taken in
// double like the CPU reference; the sum of squares is fp32 in tree order.
extern "C" __global__ void rms_norm(const void* x, int xDt, void* residual, int resDt, const void* weight, int wDt,
                                    void* out, int outDt, int hidden, float eps) {
    mstar::await_previous_kernel();
    __shared__ float scratch[32];
    __shared__ float invShared;
    const long long base = (long long)blockIdx.x * hidden;
    float ss = 0.f;
    for (int h = threadIdx.x; h < hidden; h += blockDim.x) {
        float a = load_f(x, xDt, base + h);
        if (residual != nullptr) {
            a = round_to(resDt, load_f(residual, resDt, base + h) + a);
            store_f(residual, resDt, base + h, a);
        }
        ss += a * a;
    }
    ss = block_sum(ss, scratch);
    if (threadIdx.x == 0) invShared = (float)(1.0 / sqrt((double)(ss / (float)hidden + eps)));
    __syncthreads();
    const float inv = invShared;
    // Each thread re-reads only the residual elements it wrote itself, so no barrier is needed for them.
    for (int h = threadIdx.x; h < hidden; h += blockDim.x) {
        const float a = residual != nullptr ? load_f(residual, resDt, base + h) : load_f(x, xDt, base + h);
        store_f(out, outDt, base + h, a * inv * load_f(weight, wDt, h));
    }
}
