// E4M3 weight codes dequantised in registers into bf16 mma fragments, shared by fp8_matmul.cu's skinny kernel and
// fp8_tile_matmul.cu: each value is code · scale rounded once to bf16, the dtype the tensor cores multiply.
#pragma once

#include <cuda_fp8.h>
#include "common.cuh"
#include "mma.cuh"

namespace mstar {

// Codes (lo, hi) = bytes 0 and 1 of twoCodes dequantised as one bf16 pair: the E4M3 values (exact in fp16, hence in
// fp32) times scale, each rounded once to bf16.
__device__ __forceinline__ uint32_t dequantize_pair(uint32_t twoCodes, float scale) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(twoCodes & 0xFFFFu), __NV_E4M3);
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    return pack_bf16(f.x * scale, f.y * scale);
}

// 16 codes (one 16-byte load) as 8 bf16 pairs: pair i holds codes 2i and 2i + 1.
__device__ __forceinline__ void dequantize16(const uint4& codes, float scale, uint32_t (&pairs)[8]) {
    const uint32_t words[4] = {codes.x, codes.y, codes.z, codes.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        pairs[2 * i] = dequantize_pair(words[i], scale);
        pairs[2 * i + 1] = dequantize_pair(words[i] >> 16, scale);
    }
}

}  // namespace mstar
