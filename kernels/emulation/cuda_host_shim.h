// Host emulation of the few CUDA built-ins the kernels under test use: blocks run one at a time, each CUDA thread
// is a std::thread, __syncthreads is a barrier over the block and a warp shuffle or vote exchanges through a buffer
// between two barriers over the warp. Math functions are the host's (normcdff through erfcf).
#pragma once
#include <barrier>
#include <thread>
#include <vector>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_types.h>
struct Dim3 { unsigned x = 1, y = 1, z = 1; };
inline thread_local Dim3 threadIdx, blockIdx;
inline Dim3 blockDim, gridDim;
inline std::barrier<>* g_block_barrier;
inline std::vector<std::unique_ptr<std::barrier<>>> g_warp_barriers;
inline std::vector<float> g_warp_buf;
inline void __syncthreads() { g_block_barrier->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int o) {
    int t = threadIdx.x, w = t / 32, lane = t % 32;
    g_warp_buf[t] = v;
    g_warp_barriers[w]->arrive_and_wait();
    float r = g_warp_buf[w * 32 + (lane ^ o)];
    g_warp_barriers[w]->arrive_and_wait();
    return r;
}
inline void __syncwarp(unsigned = 0xffffffffu) { g_warp_barriers[threadIdx.x / 32]->arrive_and_wait(); }
// Shuffles and votes of other types exchange through a 64-bit buffer, as the float shuffle does through its own.
inline uint64_t g_warp_buf64[1024];
template <class T> inline T exchange_in_warp(T v, int srcLane) {
    static_assert(sizeof(T) <= 8);
    const int t = threadIdx.x, w = t / 32;
    std::memcpy(&g_warp_buf64[t], &v, sizeof(T));
    g_warp_barriers[w]->arrive_and_wait();
    T r;
    std::memcpy(&r, &g_warp_buf64[w * 32 + srcLane], sizeof(T));
    g_warp_barriers[w]->arrive_and_wait();
    return r;
}
inline int __shfl_xor_sync(unsigned, int v, int o) { return exchange_in_warp(v, (threadIdx.x % 32) ^ o); }
inline unsigned long long __shfl_xor_sync(unsigned, unsigned long long v, int o) {
    return exchange_in_warp(v, (threadIdx.x % 32) ^ o);
}
inline int __shfl_sync(unsigned, int v, int srcLane) { return exchange_in_warp(v, srcLane); }
inline int __shfl_up_sync(unsigned, int v, unsigned delta) {
    const int lane = threadIdx.x % 32;
    return exchange_in_warp(v, lane >= (int)delta ? lane - (int)delta : lane);
}
inline float __shfl_up_sync(unsigned, float v, unsigned delta) {
    const int lane = threadIdx.x % 32;
    return exchange_in_warp(v, lane >= (int)delta ? lane - (int)delta : lane);
}
inline float __shfl_sync(unsigned, float v, int srcLane) { return exchange_in_warp(v, srcLane); }
inline unsigned __ballot_sync(unsigned, bool pred) {
    const int t = threadIdx.x, w = t / 32;
    g_warp_buf64[t] = pred;
    g_warp_barriers[w]->arrive_and_wait();
    unsigned bits = 0;
    for (int l = 0; l < 32; l++) bits |= (unsigned)g_warp_buf64[w * 32 + l] << l;
    g_warp_barriers[w]->arrive_and_wait();
    return bits;
}
inline int __syncthreads_or(int pred) {
    g_warp_buf64[threadIdx.x] = pred != 0;
    __syncthreads();
    int any = 0;
    for (unsigned t = 0; t < blockDim.x; t++) any |= (int)g_warp_buf64[t];
    __syncthreads();
    return any;
}
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldg(const T* p) { return *p; }
// One rounding per operation, as on the device (run.sh builds with -ffp-contract=off)
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
// Runs kernel() for every thread of a 1-D grid of 1-D blocks.
template <class F> void launch(unsigned grid, unsigned block, F kernel) {
    blockDim.x = block; gridDim.x = grid;
    for (unsigned b = 0; b < grid; b++) {
        std::barrier<> bb(block);
        g_block_barrier = &bb;
        g_warp_barriers.clear();
        for (unsigned w = 0; w < (block + 31) / 32; w++) g_warp_barriers.emplace_back(new std::barrier<>(std::min(32u, block - 32 * w)));
        g_warp_buf.assign(block, 0.f);
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < block; t++) ts.emplace_back([&, t, b] { threadIdx.x = t; blockIdx.x = b; kernel(); });
        for (auto& th : ts) th.join();
    }
}

// The kernel sources are then compiled as host code: kernels are plain functions, and every __shared__ array is shared
// by the threads of the one block that runs at a time.
#undef __global__
#define __global__
#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)
