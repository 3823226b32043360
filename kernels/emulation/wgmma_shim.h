// Host emulation of wgmma.cuh's warpgroup products and bulk stores, for kernels/emulation: each thread computes its
// own accumulators at once from the operands in the block's shared memory, reading them through the descriptors as
// the tensor cores do (start address, the stride between 8-row groups, the 128-byte swizzle of address bits 4-6 by
// bits 7-9), so a wrong layout or descriptor shows up as wrong sums; a bulk store copies at once. Fences and waits
// have nothing to do. Include after warp_mma_shim.h, with MSTAR_HOST_EMULATION defined.
#pragma once
#include "warp_mma_shim.h"

namespace mstar {

inline void wgmma_fence() {}
inline void wgmma_commit() {}
template <int N>
inline void wgmma_wait() {}
inline void fence_async_shared() {}
template <int N>
inline void wgmma_hold(float (&)[N]) {}
inline void bulk_store(void* dst, uint32_t src, int bytes) { std::memcpy(dst, g_dynamic_smem + src, bytes); }
inline void bulk_commit() {}
inline void bulk_wait_read() {}

namespace emu {
// Element (row, k) of a K-major bf16 operand of a 128-byte swizzled descriptor.
inline float wgmma_operand(uint64_t desc, int row, int k) {
    const uint32_t start = (uint32_t)(desc & 0x3FFF) << 4, stride = (uint32_t)((desc >> 32) & 0x3FFF) << 4;
    const uint32_t logical = start + (row / 8) * stride + (row % 8) * 128 + 2 * k;
    const uint32_t physical = logical ^ (((logical >> 7) & 7) << 4);
    uint16_t v;
    std::memcpy(&v, g_dynamic_smem + physical, 2);
    return bf16_half(v, 0);
}
}  // namespace emu

inline void wgmma_m64n256k16_bf16(float (&d)[128], uint64_t a, uint64_t b, int accumulate) {
    const int t = threadIdx.x % 128, w = t / 32, g = t % 32 / 4, q = t % 4;
    for (int i = 0; i < 128; ++i) {
        const int row = 16 * w + g + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * q + i % 2;
        float s = accumulate ? d[i] : 0.f;
        for (int k = 0; k < 16; ++k) s += emu::wgmma_operand(a, row, k) * emu::wgmma_operand(b, col, k);
        d[i] = s;
    }
}

}  // namespace mstar
