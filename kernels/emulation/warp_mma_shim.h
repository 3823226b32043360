// Host emulation of what the attention kernels add to cuda_host_shim.h: cp.async (copies at once, so commit and
// wait have nothing to do), the block's dynamic shared memory, and the warp-collective matrix operations
// (ldmatrix, mma.sync m16n8k16 bf16 and m16n8k8 tf32, movmatrix), each lane publishing its operands through a
// buffer between two barriers over the warp, as __shfl_xor_sync does there. Grids are 3-D. Include before the
// kernels, with MSTAR_HOST_EMULATION defined.
#pragma once
#include <array>
#include <atomic>
#include <cstring>
#include "cuda_host_shim.h"

alignas(16) inline unsigned char g_dynamic_smem[232448];
inline std::vector<std::array<uint32_t, 6>> g_warp_operands(1024);

inline void __threadfence() {}
// a block's threads run concurrently (the MoE sort's counters are shared by all of them)
inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
template <class T>
inline T __ldcg(const T* p) {
    return *p;
}

// Runs kernel() for every thread of a grid of 1-D blocks, one block at a time.
template <class F>
void launch3(Dim3 grid, unsigned block, F kernel) {
    blockDim.x = block;
    gridDim = grid;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                std::barrier<> bb(block);
                g_block_barrier = &bb;
                g_warp_barriers.clear();
                for (unsigned w = 0; w < (block + 31) / 32; w++) g_warp_barriers.emplace_back(new std::barrier<>(32));
                g_warp_buf.assign(block, 0.f);
                std::vector<std::thread> ts;
                for (unsigned t = 0; t < block; t++)
                    ts.emplace_back([&, t] {
                        threadIdx.x = t;
                        blockIdx.x = x;
                        blockIdx.y = y;
                        blockIdx.z = z;
                        kernel();
                    });
                for (auto& th : ts) th.join();
            }
}

namespace mstar {

inline void cp_async16(void* smem, const void* gmem, bool valid) {
    if (valid) std::memcpy(smem, gmem, 16);
    else std::memset(smem, 0, 16);
}
inline void cp_async_commit() {}
template <int N>
inline void cp_async_wait() {}
inline unsigned char* dynamic_smem() { return g_dynamic_smem; }
inline uint32_t smem_addr(const void* p) { return (uint32_t)((const unsigned char*)p - g_dynamic_smem); }
inline float fast_exp2(float x) { return exp2f(x); }

namespace emu {
inline void warp_barrier() { g_warp_barriers[threadIdx.x / 32]->arrive_and_wait(); }
inline float bf16_half(uint32_t r, int hi) {
    const uint32_t u = (hi ? r >> 16 : r & 0xffffu) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
// Lane (g = lane / 4, q = lane % 4) gets, of each 8x8 matrix i (rows at the addresses of lanes 8i..8i+7),
// row g columns 2q, 2q + 1; transposed, column g rows 2q, 2q + 1.
inline void ldmatrix(uint32_t (&r)[4], uint32_t addr, bool trans) {
    const int t = threadIdx.x, w0 = t & ~31, g = (t & 31) / 4, q = t % 4;
    g_warp_operands[t][0] = addr;
    warp_barrier();
    for (int i = 0; i < 4; ++i) {
        auto at = [&](int row, int col) {
            uint16_t v;
            std::memcpy(&v, g_dynamic_smem + g_warp_operands[w0 + 8 * i + row][0] + 2 * col, 2);
            return (uint32_t)v;
        };
        r[i] = trans ? at(2 * q, g) | at(2 * q + 1, g) << 16 : at(g, 2 * q) | at(g, 2 * q + 1) << 16;
    }
    warp_barrier();
}
}  // namespace emu

inline void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) { emu::ldmatrix(r, addr, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) { emu::ldmatrix(r, addr, true); }

namespace emu {
// Publishes the lane's operands to the warp, then c += A·B over K for the lane's four accumulator entries;
// A(w0, row, k) and B(w0, k, col) read the published words of warp w0.
template <int K, class FA, class FB>
inline void warp_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, FA A, FB B) {
    const int t = threadIdx.x, w0 = t & ~31, g = (t & 31) / 4, q = t % 4;
    for (int i = 0; i < 4; ++i) g_warp_operands[t][i] = a[i];
    g_warp_operands[t][4] = b0;
    g_warp_operands[t][5] = b1;
    warp_barrier();
    float d[4];
    for (int e = 0; e < 4; ++e) {
        const int row = g + 8 * (e >= 2), col = 2 * q + e % 2;
        float s = c[e];
        for (int k = 0; k < K; ++k) s += A(w0, row, k) * B(w0, k, col);
        d[e] = s;
    }
    warp_barrier();
    for (int e = 0; e < 4; ++e) c[e] = d[e];
}
}  // namespace emu

// PTX fragments: A (16x16) a0 = (g, 2q..), a1 = (g + 8, 2q..), a2 = (g, 2q + 8..), a3 = (g + 8, 2q + 8..);
// B (16x8) b0 = (2q.., g), b1 = (2q + 8.., g); C c0, c1 = (g, 2q..), c2, c3 = (g + 8, 2q..).
inline void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    emu::warp_mma<16>(
        c, a, b0, b1,
        [](int w0, int row, int k) {
            return emu::bf16_half(g_warp_operands[w0 + 4 * (row % 8) + (k % 8) / 2][(row >= 8) + 2 * (k >= 8)], k % 2);
        },
        [](int w0, int k, int n) {
            return emu::bf16_half(g_warp_operands[w0 + 4 * n + (k % 8) / 2][4 + (k >= 8)], k % 2);
        });
}

// Rounds to nearest, ties away from zero, keeping 10 mantissa bits (finite values; the kernels see no others).
inline uint32_t to_tf32(float a) { return (__float_as_uint(a) + 0x1000u) & 0xffffe000u; }

// PTX fragments: A (16x8) a0 = (g, q), a1 = (g + 8, q), a2 = (g, q + 4), a3 = (g + 8, q + 4); B (8x8) b0 = (q, g),
// b1 = (q + 4, g); C as mma_bf16's. The low 13 bits of every operand are ignored, as the device does.
inline void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    auto tf = [](uint32_t r) { return __uint_as_float(r & 0xffffe000u); };
    emu::warp_mma<8>(
        c, a, b0, b1,
        [&](int w0, int row, int k) {
            return tf(g_warp_operands[w0 + 4 * (row % 8) + k % 4][(row >= 8) + 2 * (k >= 4)]);
        },
        [&](int w0, int k, int n) { return tf(g_warp_operands[w0 + 4 * n + k % 4][4 + (k >= 4)]); });
}

inline uint32_t movmatrix_trans(uint32_t a) {
    const int t = threadIdx.x, w0 = t & ~31, g = (t & 31) / 4, q = t % 4;
    g_warp_operands[t][0] = a;
    emu::warp_barrier();
    auto m = [&](int row, int col) {
        const uint32_t v = g_warp_operands[w0 + 4 * row + col / 2][0];
        return col % 2 ? v >> 16 : v & 0xffffu;
    };
    const uint32_t d = m(2 * q, g) | m(2 * q + 1, g) << 16;
    emu::warp_barrier();
    return d;
}

}  // namespace mstar
