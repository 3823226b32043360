// Activations quantised per row (per token) to FP8 for W8A8 products (org.mstar.device.Fp8Rows): codes are E4M3
// (OCP E4M3FN), one fp32 scale a row, element (r, j) = decode(codes[r, j]) · scales[r]. The scale is the row's
// largest magnitude over 448 (1 for a row of zeros) and each code the value divided by it (IEEE fp32 division),
// rounded to nearest even and saturated, as Fp8Rows.quantise defines it on the host. One block a row: a thread
// holds the elements h = threadIdx.x + j·blockDim.x (j < kFp8RowPerThread) in registers, the block finds the row's
// largest magnitude, then every thread encodes its own. The launcher gives a row at most
// blockDim.x · kFp8RowPerThread elements.
//
// rms_norm_fp8 and silu_mul_fp8 are rms_norm's and silu_mul's arithmetic with this quantisation as their store
// (their fp32 results are quantised, not rounded to bf16 first), so a W8A8 product's input arrives as FP8.
#include <cuda_fp8.h>
#include "activations.cuh"
#include "common.cuh"

using namespace mstar;

namespace {

constexpr int kFp8RowPerThread = 32;

__device__ __forceinline__ unsigned char e4m3_code(float v) {
    return static_cast<unsigned char>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// Quantises the row a block holds (elements past `width` are ignored) into codes[row·width ..] and scales[row];
// with roundTrip non-null also writes each element's dequantised value rounded once to bf16 (the input of a bf16
// product that stands in for the FP8 one).
__device__ __forceinline__ void quantise_row(const float (&a)[kFp8RowPerThread], long long row, int width,
                                             unsigned char* codes, float* scales, __nv_bfloat16* roundTrip) {
    __shared__ float scratch[32];
    float amax = 0.f;
#pragma unroll
    for (int j = 0; j < kFp8RowPerThread; ++j) {
        const int h = threadIdx.x + j * blockDim.x;
        if (h < width) amax = fmaxf(amax, fabsf(a[j]));
    }
    amax = block_max(amax, scratch);
    const float scale = amax > 0.f ? amax / 448.f : 1.f;
    const long long base = row * width;
#pragma unroll
    for (int j = 0; j < kFp8RowPerThread; ++j) {
        const int h = threadIdx.x + j * blockDim.x;
        if (h < width) {
            const unsigned char c = e4m3_code(a[j] / scale);
            codes[base + h] = c;
            if (roundTrip != nullptr) roundTrip[base + h] = __float2bfloat16_rn(e4m3_to_float(c) * scale);
        }
    }
    if (threadIdx.x == 0) scales[row] = scale;
}

}  // namespace

// codes[r, :], scales[r] = x[r, :] quantised (x F32 or BF16); roundTrip, when non-null, gets the dequantised row in
// bf16. One block a row.
extern "C" __global__ void fp8_quantize_rows(const void* x, int xDt, unsigned char* codes, float* scales,
                                             __nv_bfloat16* roundTrip, int k) {
    await_previous_kernel();
    const long long row = blockIdx.x;
    float a[kFp8RowPerThread];
#pragma unroll
    for (int j = 0; j < kFp8RowPerThread; ++j) {
        const int h = threadIdx.x + j * blockDim.x;
        a[j] = h < k ? load_f(x, xDt, row * k + h) : 0.f;
    }
    quantise_row(a, row, k, codes, scales, roundTrip);
}

// rms_norm (norm.cu, its strided path) with the quantised row as its output: with a residual, residual += x
// (rounded to the residual's dtype) and the sum is normalised; the reciprocal root in double, the sum of squares
// fp32 in tree order. One block a row.
extern "C" __global__ void rms_norm_fp8(const void* x, int xDt, void* residual, int resDt, const void* weight, int wDt,
                                        unsigned char* codes, float* scales, int hidden, float eps) {
    await_previous_kernel();
    __shared__ float scratch[32];
    __shared__ float invShared;
    const long long row = blockIdx.x;
    const long long base = row * hidden;
    float a[kFp8RowPerThread];
#pragma unroll
    for (int j = 0; j < kFp8RowPerThread; ++j) {
        const int h = threadIdx.x + j * blockDim.x;
        a[j] = h < hidden ? load_f(x, xDt, base + h) : 0.f;
    }
    if (residual != nullptr) add_residual_row(a, residual, resDt, base, hidden);
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < kFp8RowPerThread; ++j) ss += a[j] * a[j];  // past the row: zeros
    ss = block_sum(ss, scratch);
    if (threadIdx.x == 0) invShared = (float)(1.0 / sqrt((double)(ss / (float)hidden + eps)));
    __syncthreads();
    const float inv = invShared;
#pragma unroll
    for (int j = 0; j < kFp8RowPerThread; ++j) {
        const int h = threadIdx.x + j * blockDim.x;
        a[j] = h < hidden ? a[j] * inv * load_f(weight, wDt, h) : 0.f;
    }
    quantise_row(a, row, hidden, codes, scales, nullptr);
}

// silu(gateUp[r, :inter]) · gateUp[r, inter:], quantised. One block a row.
extern "C" __global__ void silu_mul_fp8(const void* gateUp, int inDt, unsigned char* codes, float* scales, int inter) {
    await_previous_kernel();
    const long long row = blockIdx.x;
    float a[kFp8RowPerThread];
#pragma unroll
    for (int j = 0; j < kFp8RowPerThread; ++j) {
        const int h = threadIdx.x + j * blockDim.x;
        a[j] = h < inter ? silu_times(load_f(gateUp, inDt, row * 2 * inter + h),
                                      load_f(gateUp, inDt, row * 2 * inter + inter + h))
                         : 0.f;
    }
    quantise_row(a, row, inter, codes, scales, nullptr);
}

// out[r, j] = decode(codes[r, j]) · scales[r] rounded once to bf16: FP8 rows as the input of a bf16 product.
extern "C" __global__ void fp8_rows_dequantize_bf16(const unsigned char* codes, const float* scales,
                                                    __nv_bfloat16* out, long long rows, int k) {
    await_previous_kernel();
    MSTAR_GRID_LOOP(e, rows * k) { out[e] = __float2bfloat16_rn(e4m3_to_float(codes[e]) * scales[e / k]); }
}

// out[i] = scale[0] for i < n: a per-tensor weight scale as the per-row vector the W8A8 GEMM's epilogue reads.
extern "C" __global__ void fp8_broadcast_scale(const float* scale, float* out, int n) {
    await_previous_kernel();
    MSTAR_GRID_LOOP(i, (long long)n) { out[i] = scale[0]; }
}
