// Eight consecutive elements as floats, and back (bf16 rounded to nearest even): the 16-byte (bf16) or 32-byte
// (fp32) unit of the row-wise kernels that keep a thread's elements in registers (rms_norm, qk_norm_rope_append).
#pragma once

#include "common.cuh"

namespace mstar {

__device__ __forceinline__ void load8(const __nv_bfloat16* p, long long v, float (&a)[8]) {
    const uint4 u = reinterpret_cast<const uint4*>(p)[v];
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(h[j]);
        a[2 * j] = f.x;
        a[2 * j + 1] = f.y;
    }
}

__device__ __forceinline__ void load8(const float* p, long long v, float (&a)[8]) {
    const float4 lo = reinterpret_cast<const float4*>(p)[2 * v], hi = reinterpret_cast<const float4*>(p)[2 * v + 1];
    a[0] = lo.x, a[1] = lo.y, a[2] = lo.z, a[3] = lo.w, a[4] = hi.x, a[5] = hi.y, a[6] = hi.z, a[7] = hi.w;
}

__device__ __forceinline__ void store8(__nv_bfloat16* p, long long v, const float (&a)[8]) {
    uint4 u;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) h[j] = __floats2bfloat162_rn(a[2 * j], a[2 * j + 1]);
    reinterpret_cast<uint4*>(p)[v] = u;
}

__device__ __forceinline__ void store8(float* p, long long v, const float (&a)[8]) {
    reinterpret_cast<float4*>(p)[2 * v] = make_float4(a[0], a[1], a[2], a[3]);
    reinterpret_cast<float4*>(p)[2 * v + 1] = make_float4(a[4], a[5], a[6], a[7]);
}

}  // namespace mstar
