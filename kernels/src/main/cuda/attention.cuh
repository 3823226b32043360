// Paged-KV geometry and masks shared by the decode and prefill attention kernels.
// Plan layout (FlashInfer's): sequence r owns query rows [qoIndptr[r], qoIndptr[r+1]) and pages
// kvIndices[kvIndptr[r] .. kvIndptr[r+1]), the last holding lastPageLen[r] tokens. Query i of r sits at
// position kvLen - qLen + i. The pool is [layers, pages, 2, pageSize, kvHeads, headDim], of the queries' type or of
// E4M3 codes (E4m3).
#pragma once

#include "common.cuh"

namespace mstar {

constexpr float kLog2e = 1.4426950408889634f;

struct PagedKv {
    const void* pool;
    const int* kvIndptr;
    const int* kvIndices;
    const int* lastPageLen;
    int layer;
    int numPages;
    int pageSize;
    int kvHeads;

    __device__ __forceinline__ int length(int r) const {
        const int pages = kvIndptr[r + 1] - kvIndptr[r];
        return pages == 0 ? 0 : (pages - 1) * pageSize + lastPageLen[r];
    }

    // Element offset of head g of token pos (K when kv = 0, V when kv = 1) of sequence r.
    __device__ __forceinline__ long long offset(int r, int pos, int kv, int g, int headDim) const {
        const int page = kvIndices[kvIndptr[r] + pos / pageSize];
        const int slot = pos - (pos / pageSize) * pageSize;
        return ((((long long)layer * numPages + page) * 2 + kv) * pageSize + slot) * kvHeads * headDim +
               (long long)g * headDim;
    }
};

struct Mask {
    int causal;
    int windowLeft;
    int contextOnly;

    // Keys visible to the query at position qpos of a sequence of kvLen keys and qLen queries: [lo, hi).
    __device__ __forceinline__ void visible(int kvLen, int qLen, int qpos, int& lo, int& hi) const {
        hi = causal ? min(kvLen, qpos + 1) : kvLen;
        if (contextOnly) hi = min(hi, kvLen - qLen);
        lo = windowLeft >= 0 ? max(0, qpos - windowLeft) : 0;
        if (hi < lo) hi = lo;
    }
};

// An element of an FP8 KV pool: one E4M3 code (common.cuh's e4m3_value), a distinct type so that the row loads and
// element loads below widen it as such.
struct E4m3 {
    unsigned char code;
};

// N consecutive elements of T from 16-byte-aligned memory, widened to fp32.
template <typename T, int N>
__device__ __forceinline__ void load_row(const T* src, float (&dst)[N]);

template <int N>
__device__ __forceinline__ void load_row(const float* src, float (&dst)[N]) {
    static_assert(N % 4 == 0, "fp32 rows load in 16-byte vectors");
#pragma unroll
    for (int i = 0; i < N; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(src + i);
        dst[i] = v.x;
        dst[i + 1] = v.y;
        dst[i + 2] = v.z;
        dst[i + 3] = v.w;
    }
}

template <int N>
__device__ __forceinline__ void load_row(const __nv_bfloat16* src, float (&dst)[N]) {
    static_assert(N % 8 == 0, "bf16 rows load in 16-byte vectors");
#pragma unroll
    for (int i = 0; i < N; i += 8) {
        const uint4 v = *reinterpret_cast<const uint4*>(src + i);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[j]));
            dst[i + 2 * j] = f.x;
            dst[i + 2 * j + 1] = f.y;
        }
    }
}

template <int N>
__device__ __forceinline__ void load_row(const E4m3* src, float (&dst)[N]) {
    static_assert(N % 16 == 0, "E4M3 rows load in 16-byte vectors");
#pragma unroll
    for (int i = 0; i < N; i += 16) {
        const uint4 v = *reinterpret_cast<const uint4*>(src + i);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            // two codes a conversion (cvt.rn.f16x2.e4m3x2 on sm_89+): exact in fp16
#pragma unroll
            for (int p = 0; p < 2; ++p) {
                const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
                    static_cast<__nv_fp8x2_storage_t>((w[j] >> (16 * p)) & 0xFFFFu), __NV_E4M3);
                const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
                dst[i + 4 * j + 2 * p] = f.x;
                dst[i + 4 * j + 2 * p + 1] = f.y;
            }
        }
    }
}

#ifndef MSTAR_HOST_EMULATION  // kernels/emulation provides host versions of what follows
// Asynchronous 16-byte global-to-shared copies (sm_80+), grouped and awaited by count of pending groups.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
    const int bytes = valid ? 16 : 0;  // 0: the 16 bytes are zero-filled, nothing is read
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The block's dynamic shared memory: one extern array per translation unit, so every kernel names it alike.
__device__ __forceinline__ unsigned char* dynamic_smem() {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    return smem_raw;
}
#endif

template <typename T>
__device__ __forceinline__ void store_elem(T* dst, long long i, float v);

template <>
__device__ __forceinline__ void store_elem<float>(float* dst, long long i, float v) {
    dst[i] = v;
}

template <>
__device__ __forceinline__ void store_elem<__nv_bfloat16>(__nv_bfloat16* dst, long long i, float v) {
    dst[i] = __float2bfloat16_rn(v);
}

template <typename T>
__device__ __forceinline__ float load_elem(const T* src, long long i);

template <>
__device__ __forceinline__ float load_elem<float>(const float* src, long long i) {
    return src[i];
}

template <>
__device__ __forceinline__ float load_elem<__nv_bfloat16>(const __nv_bfloat16* src, long long i) {
    return __bfloat162float(src[i]);
}

template <>
__device__ __forceinline__ float load_elem<E4m3>(const E4m3* src, long long i) {
    return e4m3_value(src[i].code);
}

}  // namespace mstar
