// The skinny matmul's walk over K (skinny_matmul.cu explains the fragment layout), shared by the kernels that stream
// weights past a few rows of x on the tensor cores: skinny_matmul.cu's products and moe.cu's expert products.
#pragma once

#include "common.cuh"
#include "mma.cuh"

using namespace mstar;

namespace {

constexpr int kSkinnyWarps = 8;
constexpr int kSkinnyChunk = 64;  // k elements one warp consumes per group of four mma k-steps

// U consecutive chunks of k starting at 16-byte vector v of each row: all loads first, then the mma.
template <int MT, int U>
__device__ __forceinline__ void skinny_chunks(float (&acc)[MT][4], const uint4* w0, const uint4* w1,
                                              const uint4* const (&xr)[MT], const bool (&xLive)[MT], int v) {
    constexpr int kChunkVecs = kSkinnyChunk / 8;
    uint4 a[U][2][2], b[U][MT][2];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            // The weights are read once per step: stream them past L1 (evict-first).
            a[u][0][h] = __ldcs(w0 + v + u * kChunkVecs + h);
            a[u][1][h] = __ldcs(w1 + v + u * kChunkVecs + h);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) b[u][mt][h] = __ldg(xr[mt] + v + u * kChunkVecs + h);
        }
    }
    const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            // x rows past M read row M - 1 (valid memory) and contribute zeros to their own columns
            b[u][mt][0] = xLive[mt] ? b[u][mt][0] : zero;
            b[u][mt][1] = xLive[mt] ? b[u][mt][1] : zero;
        }
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const uint32_t w[4] = {fragment_word(a[u][0], 2 * s), fragment_word(a[u][1], 2 * s),
                                   fragment_word(a[u][0], 2 * s + 1), fragment_word(a[u][1], 2 * s + 1)};
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma_bf16(acc[mt], w, fragment_word(b[u][mt], 2 * s), fragment_word(b[u][mt], 2 * s + 1));
            }
        }
    }
}

// The pipelined body: each warp takes a contiguous run of chunks and issues the loads of its next U chunks
// before the mma of the current ones, so a group of loads is always in flight. It needs about twice the
// registers (two blocks per SM instead of four), which pays where the blocks make one wave at two per SM or where
// K is long; SkinnyMatmul chooses by N and K only, so a row's result still does not depend on M.
template <int MT, int U>
struct SkinnyFrags {
    uint4 a[U][2][2];
    uint4 b[U][MT][2];
};

template <int MT, int U>
__device__ __forceinline__ void skinny_load(SkinnyFrags<MT, U>& f, const uint4* w0, const uint4* w1,
                                            const uint4* const (&xr)[MT], int c, int end) {
    constexpr int kChunkVecs = kSkinnyChunk / 8;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (c + u < end) {
            const int v = (c + u) * kChunkVecs;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                f.a[u][0][h] = __ldcs(w0 + v + h);
                f.a[u][1][h] = __ldcs(w1 + v + h);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) f.b[u][mt][h] = __ldg(xr[mt] + v + h);
            }
        }
    }
}

template <int MT, int U>
__device__ __forceinline__ void skinny_mma_frags(float (&acc)[MT][4], SkinnyFrags<MT, U>& f,
                                                 const bool (&xLive)[MT], int c, int end) {
    const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (c + u < end) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                f.b[u][mt][0] = xLive[mt] ? f.b[u][mt][0] : zero;
                f.b[u][mt][1] = xLive[mt] ? f.b[u][mt][1] : zero;
            }
#pragma unroll
            for (int s = 0; s < 4; ++s) {
                const uint32_t w[4] = {fragment_word(f.a[u][0], 2 * s), fragment_word(f.a[u][1], 2 * s),
                                       fragment_word(f.a[u][0], 2 * s + 1), fragment_word(f.a[u][1], 2 * s + 1)};
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_bf16(acc[mt], w, fragment_word(f.b[u][mt], 2 * s), fragment_word(f.b[u][mt], 2 * s + 1));
                }
            }
        }
    }
}

// Chunks [begin, end) in increasing order, U at a time, the next group's loads issued before this group's mma.
template <int MT, int U>
__device__ __forceinline__ void skinny_pipelined(float (&acc)[MT][4], const uint4* w0, const uint4* w1,
                                                 const uint4* const (&xr)[MT], const bool (&xLive)[MT], int begin,
                                                 int end) {
    SkinnyFrags<MT, U> f0, f1;
    int c = begin;
    if (c < end) skinny_load<MT, U>(f0, w0, w1, xr, c, end);
    while (c < end) {
        if (c + U < end) skinny_load<MT, U>(f1, w0, w1, xr, c + U, end);
        skinny_mma_frags<MT, U>(acc, f0, xLive, c, end);
        c += U;
        if (c >= end) break;
        if (c + U < end) skinny_load<MT, U>(f0, w0, w1, xr, c + U, end);
        skinny_mma_frags<MT, U>(acc, f1, xLive, c, end);
        c += U;
    }
}

// MT 8-row tiles of x; U chunks of k in flight per warp before the first mma uses them. The block's walk over K
// for the weight rows at w0 (the tile's rows 0-7: this lane's g) and w1 (rows 8-15), each already advanced to this
// lane's 2t-th 16-byte vector; xr[mt] likewise points at the x row of tile mt's column g, and xLive[mt] says whether
// that column holds a row (a dead one reads valid memory and contributes zeros). Every warp's partial tile is left
// in partial, ending with the barrier after which the caller sums them in warp order. Fragment element i of lane
// (g, t) in tile mt is weight row g + 8·(i / 2) and x column 8·mt + 2t + i % 2.
template <int MT, int U, bool PIPE>
__device__ __forceinline__ void skinny_walk(const uint4* w0, const uint4* w1, const uint4* const (&xr)[MT],
                                            const bool (&xLive)[MT], int K,
                                            float (&partial)[kSkinnyWarps][MT * 4][32]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int chunks = K / kSkinnyChunk;
    constexpr int kChunkVecs = kSkinnyChunk / 8;  // 16-byte vectors per row and chunk

    float acc[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.f;

    if (PIPE) {
        skinny_pipelined<MT, U>(acc, w0, w1, xr, xLive, warp * chunks / kSkinnyWarps, (warp + 1) * chunks / kSkinnyWarps);
    } else {
        // Whole groups of U chunks load everything before the first mma; the last, partial group goes one chunk
        // at a time. Either way a warp's chunks are summed in increasing order.
        int c0 = warp * U;
        for (; c0 + U <= chunks; c0 += kSkinnyWarps * U) skinny_chunks<MT, U>(acc, w0, w1, xr, xLive, c0 * kChunkVecs);
        for (int c = c0; c < chunks && c < c0 + U; ++c) skinny_chunks<MT, 1>(acc, w0, w1, xr, xLive, c * kChunkVecs);
    }

#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) partial[warp][mt * 4 + i][lane] = acc[mt][i];
    }
    __syncthreads();
}

// Fragment element j (tile mt's element i at mt * 4 + i) of lane l, summed over the warps in warp order.
template <int MT>
__device__ __forceinline__ float warp_order_sum(const float (&partial)[kSkinnyWarps][MT * 4][32], int j, int l) {
    float sum = 0.f;
#pragma unroll
    for (int q = 0; q < kSkinnyWarps; ++q) sum += partial[q][j][l];
    return sum;
}

}  // namespace
