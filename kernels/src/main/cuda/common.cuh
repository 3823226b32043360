// Shared helpers for every kernel family: element access by run-time dtype, block reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

namespace mstar {

// Codes are the ordinals of org.mstar.device.DType, passed as plain ints by the launchers.
enum DTypeCode : int { DT_F32 = 0, DT_BF16 = 1, DT_F16 = 2, DT_I32 = 3, DT_I64 = 4, DT_U8 = 5, DT_F8_E4M3 = 6 };

// The value of an E4M3 code (Float8E4m3.decode): exact in fp16, hence in fp32.
__device__ __forceinline__ float e4m3_value(unsigned char code) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3)));
}

// The E4M3 code nearest v, ties to even, saturating at ±448 (Float8E4m3.encode): how an FP8 KV pool is written.
__device__ __forceinline__ unsigned char e4m3_code(float v) {
    return static_cast<unsigned char>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// The dtype branch is uniform across a launch, so it costs a predicted branch, not divergence.
__device__ __forceinline__ float load_f(const void* p, int dt, long long i) {
    switch (dt) {
        case DT_BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
        case DT_F16: return __half2float(static_cast<const __half*>(p)[i]);
        case DT_F8_E4M3: return e4m3_value(static_cast<const unsigned char*>(p)[i]);
        default: return static_cast<const float*>(p)[i];
    }
}

// Rounds to nearest even for the 16-bit types, as HalfFloats does on the host, and for E4M3 as Float8E4m3 does.
__device__ __forceinline__ void store_f(void* p, int dt, long long i, float v) {
    switch (dt) {
        case DT_BF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
        case DT_F16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
        case DT_F8_E4M3: static_cast<unsigned char*>(p)[i] = e4m3_code(v); break;
        default: static_cast<float*>(p)[i] = v; break;
    }
}

// What storing v as dt and reading it back yields.
__device__ __forceinline__ float round_to(int dt, float v) {
    switch (dt) {
        case DT_BF16: return __bfloat162float(__float2bfloat16_rn(v));
        case DT_F16: return __half2float(__float2half_rn(v));
        case DT_F8_E4M3: return e4m3_value(e4m3_code(v));
        default: return v;
    }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block; every thread gets the result. scratch holds >= 32 floats.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.f;
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : -INFINITY;
    return warp_max(v);
}

// Grid-stride loop over [0, n) with 64-bit indices.
#define MSTAR_GRID_LOOP(i, n)                                                          \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n);       \
         i += (long long)gridDim.x * blockDim.x)

// Element offset of slot `slot` of page `page` of `layer` in a KV pool [layers, pages, 2, pageSize, kvHeads,
// headDim]: the token's K heads when kv = 0, its V heads when kv = 1 (tokenElems = kvHeads · headDim).
__device__ __forceinline__ long long pool_slot(int layer, int numPages, int page, int kv, int pageSize, int slot,
                                               int tokenElems) {
    return ((((long long)layer * numPages + page) * 2 + kv) * pageSize + slot) * tokenElems;
}

// Programmatic dependent launch (sm_90). In a decode graph, CudaGraph makes each edge into one of these kernels
// programmatic: the kernel may be launched as the one before it finishes, so its launch overlaps that kernel's
// tail. Every kernel therefore calls this first, before it reads what an earlier kernel wrote or writes
// anything: it waits for the kernels before it to complete with their memory visible. Most kernels release their
// dependents only at exit: a trigger (release_dependents) at the start of every kernel measured 8B decode at 16
// rows 18 % slower (5.04 → 5.96 ms a step, docs/results/2026-12-02/perf-table.md), the waiting blocks taking SM slots from the running
// ones. Outside a programmatic edge the wait and the trigger are no-ops (eager launches keep stream order).
__device__ __forceinline__ void await_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel's blocks launch before this one exits; they run up to their own await_previous_kernel.
// Only qkv_rope_append calls it, in steps of a few tokens (CudaOps.RELEASE_ATTENTION_ROWS): its dependent, decode
// attention, reads the step's page table (three dependent loads) before it needs anything qkv_rope_append writes.
__device__ __forceinline__ void release_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// A norm kernel's residual add over the row elements a thread holds, h = threadIdx.x + j·blockDim.x: a[j] becomes
// residual + a[j] rounded to the residual's dtype, and is stored back. Every residual load is issued before the
// first store (the norm kernels' loads must not wait behind stores, see rms_norm).
template <int N>
__device__ __forceinline__ void add_residual_row(float (&a)[N], void* residual, int resDt, long long base, int hidden) {
    float r[N];
#pragma unroll
    for (int j = 0; j < N; ++j) {
        const int h = threadIdx.x + j * blockDim.x;
        r[j] = h < hidden ? load_f(residual, resDt, base + h) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < N; ++j) {
        const int h = threadIdx.x + j * blockDim.x;
        a[j] = round_to(resDt, r[j] + a[j]);
        if (h < hidden) store_f(residual, resDt, base + h, a[j]);
    }
}

}  // namespace mstar
