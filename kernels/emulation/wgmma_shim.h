// Host emulation of wgmma.cuh's warpgroup products and bulk stores, for kernels/emulation: each thread computes its
// own accumulators at once from the operands in the block's shared memory, reading them through the descriptors as
// the tensor cores do (start address, the stride between 8-row groups, for MN-major operands the leading offset
// between 64-element blocks, the 128-byte swizzle of address bits 4-6 by bits 7-9), so a wrong layout or descriptor
// shows up as wrong sums; register A operands are exchanged within each warp as mma_bf16's are. A bulk store copies
// at once. Fences and waits
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

// Element (k, n) of an MN-major bf16 operand (wgmma_desc_mn): 64-element column blocks `leading` bytes apart, 8-row
// groups of K `stride` bytes apart, rows of 128 bytes, the same swizzle.
inline float wgmma_operand_mn(uint64_t desc, int k, int n) {
    const uint32_t start = (uint32_t)(desc & 0x3FFF) << 4, leading = (uint32_t)((desc >> 16) & 0x3FFF) << 4,
                   stride = (uint32_t)((desc >> 32) & 0x3FFF) << 4;
    const uint32_t logical = start + (n / 64) * leading + (k / 8) * stride + (k % 8) * 128 + 2 * (n % 64);
    const uint32_t physical = logical ^ (((logical >> 7) & 7) << 4);
    uint16_t v;
    std::memcpy(&v, g_dynamic_smem + physical, 2);
    return bf16_half(v, 0);
}

// d (64 x N) = A · Bᵀ (+ d), both K-major through descriptors.
template <int N>
inline void wgmma_ss(float (&d)[N / 2], uint64_t a, uint64_t b, int accumulate) {
    const int t = threadIdx.x % 128, w = t / 32, g = t % 32 / 4, q = t % 4;
    for (int i = 0; i < N / 2; ++i) {
        const int row = 16 * w + g + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * q + i % 2;
        float s = accumulate ? d[i] : 0.f;
        for (int k = 0; k < 16; ++k) s += wgmma_operand(a, row, k) * wgmma_operand(b, col, k);
        d[i] = s;
    }
}

// d (64 x N) = A · B (+ d), A from the registers of each warp (mma.sync's A fragment for its 16 rows, published to
// the warp as mma_bf16 does), B MN-major through a descriptor.
template <int N>
inline void wgmma_rt(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    const int t = threadIdx.x, w0 = t & ~31, g = t % 32 / 4, q = t % 4;
    for (int i = 0; i < 4; ++i) g_warp_operands[t][i] = a[i];
    warp_barrier();
    for (int i = 0; i < N / 2; ++i) {
        const int row = g + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * q + i % 2;
        float s = accumulate ? d[i] : 0.f;
        for (int k = 0; k < 16; ++k) {
            const uint32_t pair = g_warp_operands[w0 + 4 * (row % 8) + (k % 8) / 2][(row >= 8) + 2 * (k >= 8)];
            s += bf16_half(pair, k % 2) * wgmma_operand_mn(b, k, col);
        }
        d[i] = s;
    }
    warp_barrier();
}
}  // namespace emu

inline void wgmma_m64n256k16_bf16(float (&d)[128], uint64_t a, uint64_t b, int accumulate) {
    emu::wgmma_ss<256>(d, a, b, accumulate);
}
inline void wgmma_m64n128k16_bf16(float (&d)[64], uint64_t a, uint64_t b, int accumulate) {
    emu::wgmma_ss<128>(d, a, b, accumulate);
}
inline void wgmma_m64n64k16_bf16(float (&d)[32], uint64_t a, uint64_t b, int accumulate) {
    emu::wgmma_ss<64>(d, a, b, accumulate);
}
inline void wgmma_m64n128k16_bf16_rt(float (&d)[64], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    emu::wgmma_rt<128>(d, a, b, accumulate);
}
inline void wgmma_m64n192k16_bf16_rt(float (&d)[96], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    emu::wgmma_rt<192>(d, a, b, accumulate);
}

}  // namespace mstar
