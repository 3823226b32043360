// Skinny matmul for decode steps: out[M, N] = x[M, K] · w[N, K]ᵀ with bf16 operands, fp32 accumulation and
// M ≤ 8·MT rows. At a few rows the product is a stream over the weights (2·N·K bytes against 2·M·N·K FLOPs),
// so the kernel is built to keep every SM reading: the weights are the mma's A operand (16 weight rows per
// tile, one tile per block), x is its 8-column B operand, each thread loads its weight and x bytes with
// 16-byte loads straight into the fragments, and the block's 8 warps split K, their partial tiles summed in
// shared memory in warp order.
//
// The fragments need no shuffles because a dot product may visit k in any order as long as A and B agree: in
// each 64-element chunk of k, lane (g = lane / 4, t = lane % 4) loads elements 16t .. 16t + 15 of weight rows
// g and g + 8 and of x row g, and mma k-step s takes words 2s and 2s + 1 of those 16 elements as the
// fragment's columns (2t, 2t + 1) and (2t + 8, 2t + 9). Over the four k-steps the warp covers the chunk once.
//
// A column's sum visits k in the same order whatever M is (x rows past M are zeros in their own columns of
// the mma), so a row's result does not depend on how many rows share the launch of one instantiation.
//
// With a gated activation (act != 0; w is a gate/up weight [2I, K], gate rows then up rows) the tile's weight
// rows 0-7 are gate rows c0 .. c0 + 7 and rows 8-15 the up rows I + c0 .. I + c0 + 7, so the block ends with the
// gate and up sums of the same 8 output columns and applies the activation itself: out is [M, I], and the
// separate activation kernel, its launch and the [M, 2I] round trip are gone. Each sum visits k as in the plain
// product, and is rounded to out's dtype before the activation as the stored intermediate would be, so the
// result is the plain product followed by silu_mul or gelu_tanh_mul, bit for bit.
#include "activations.cuh"
#include "common.cuh"
#include "mma.cuh"
#include "rotary.cuh"

using namespace mstar;

namespace {

constexpr int kSkinnyWarps = 8;
constexpr int kSkinnyChunk = 64;  // k elements one warp consumes per group of four mma k-steps

__device__ __forceinline__ uint32_t word(const uint4 (&half)[2], int i) {
    const uint4& v = half[i >> 2];
    switch (i & 3) {
        case 0: return v.x;
        case 1: return v.y;
        case 2: return v.z;
        default: return v.w;
    }
}

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
            const uint32_t w[4] = {word(a[u][0], 2 * s), word(a[u][1], 2 * s), word(a[u][0], 2 * s + 1),
                                   word(a[u][1], 2 * s + 1)};
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) mma_bf16(acc[mt], w, word(b[u][mt], 2 * s), word(b[u][mt], 2 * s + 1));
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
                const uint32_t w[4] = {word(f.a[u][0], 2 * s), word(f.a[u][1], 2 * s), word(f.a[u][0], 2 * s + 1),
                                       word(f.a[u][1], 2 * s + 1)};
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_bf16(acc[mt], w, word(f.b[u][mt], 2 * s), word(f.b[u][mt], 2 * s + 1));
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

// The plain product's epilogue: none, or a gated activation (SkinnyMatmul.Activation).
enum SkinnyAct : int { ACT_NONE = 0, ACT_SILU = 1, ACT_GELU_TANH = 2 };

// MT 8-row tiles of x (M ≤ 8·MT); U chunks of k in flight per warp before the first mma uses them.
// The block's walk over K for weight rows row0 (the tile's rows 0-7: this lane's g) and row1 (rows 8-15), every
// warp's partial tile left in partial, ending with the barrier after which the caller sums them in warp order.
// Fragment element i of lane (g, t) in tile mt is weight row g + 8·(i / 2) and x row 8·mt + 2t + i % 2.
template <int MT, int U, bool PIPE>
__device__ __forceinline__ void skinny_sums(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                                            int row0, int row1, int M, int K, bool releaseNext,
                                            float (&partial)[kSkinnyWarps][MT * 4][32]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const uint4* w0 = reinterpret_cast<const uint4*>(w + (long long)row0 * K) + 2 * t;
    const uint4* w1 = reinterpret_cast<const uint4*>(w + (long long)row1 * K) + 2 * t;
    const uint4* xr[MT];
    bool xLive[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        xLive[mt] = mt * 8 + g < M;
        xr[mt] = reinterpret_cast<const uint4*>(x + (long long)min(mt * 8 + g, M - 1) * K) + 2 * t;
    }
    const int chunks = K / kSkinnyChunk;
    constexpr int kChunkVecs = kSkinnyChunk / 8;  // 16-byte vectors per row and chunk

    await_previous_kernel();
    if (releaseNext) release_dependents();

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

template <int MT, int U, bool PIPE>
__device__ __forceinline__ void skinny_body(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                                            void* out, int outDt, const void* bias, int biasDt, int M, int N, int K,
                                            int act) {
    __shared__ float partial[kSkinnyWarps][MT * 4][32];
    const int g = (threadIdx.x & 31) >> 2;
    const int n0 = blockIdx.x * 16;
    // Weight rows of the tile: n0 .. n0 + 15, or gated 8 gate rows and their 8 up rows. Rows past the weight (the
    // last tile of an N that is not a multiple of 16, or of 8 gated) reread its last row; they are not stored.
    const int inter = N / 2, c0 = blockIdx.x * 8;
    const int row0 = act == ACT_NONE ? min(n0 + g, N - 1) : min(c0 + g, inter - 1);
    const int row1 = act == ACT_NONE ? min(n0 + g + 8, N - 1) : inter + min(c0 + g, inter - 1);
    skinny_sums<MT, U, PIPE>(x, w, row0, row1, M, K, false, partial);
    if (act != ACT_NONE) {
        // gated: element i < 2 is the gate sum of column c0 + g, element i + 2 the up sum of the same column
        for (int e = threadIdx.x; e < MT * 2 * 32; e += blockDim.x) {
            const int l = e & 31, j2 = e >> 5, mt = j2 >> 1, i = j2 & 1;
            const int n = c0 + (l >> 2);
            const int m = mt * 8 + 2 * (l & 3) + i;
            if (m < M && n < inter) {
                const float gate = round_to(outDt, warp_order_sum<MT>(partial, mt * 4 + i, l));
                const float up = round_to(outDt, warp_order_sum<MT>(partial, mt * 4 + i + 2, l));
                store_f(out, outDt, (long long)m * inter + n,
                        act == ACT_SILU ? silu_times(gate, up) : gelu_tanh_times(gate, up));
            }
        }
        return;
    }
    for (int e = threadIdx.x; e < MT * 4 * 32; e += blockDim.x) {
        const int l = e & 31, j = e >> 5, mt = j >> 2, i = j & 3;
        const int n = n0 + (l >> 2) + 8 * (i >> 1);
        const int m = mt * 8 + 2 * (l & 3) + (i & 1);
        if (m < M && n < N) {
            // the bias joins the fp32 sum before its one rounding, as cuBLAS's accumulator and bias_add_cast do
            const float b = bias != nullptr ? load_f(bias, biasDt, n) : 0.f;
            store_f(out, outDt, (long long)m * N + n, warp_order_sum<MT>(partial, j, l) + b);
        }
    }
}

// The qkv projection with RoPE and the KV append in its epilogue (bf16 throughout, the whole head rotated): the
// first (qHeads + kvHeads)·headDim/16 tiles each take 8 dims of one q or k head as rows 0-7 and their 8 rotation
// partners (NeoX: half a head on; interleaved: the next dim) as rows 8-15, so a lane holds both elements of a pair
// and rotates them; the remaining tiles are 16 consecutive rows of v. q goes to q, k and v to the token's slot in
// the pool. Each sum visits K as in the plain product and is rounded to bf16 first, then rotated with the angles
// and arithmetic of qkv_rope_append (rope_rotate), so the result is the plain product followed by qkv_rope_append.
template <int MT, int U, bool PIPE>
__device__ __forceinline__ void skinny_qkv_rope_body(const __nv_bfloat16* __restrict__ x,
                                                     const __nv_bfloat16* __restrict__ w, int M, int K,
                                                     const int* posIds, const float* invFreq, __nv_bfloat16* q,
                                                     __nv_bfloat16* pool, const int* pageIdx, const int* offsets,
                                                     int layer, int numPages, int pageSize, int qHeads, int kvHeads,
                                                     int headDim, int interleave, int releaseAttention) {
    __shared__ float partial[kSkinnyWarps][MT * 4][32];
    const int g = (threadIdx.x & 31) >> 2;
    const int half = headDim / 2, tilesPerHead = headDim / 16, ropeTiles = (qHeads + kvHeads) * tilesPerHead;
    const bool rope = blockIdx.x < ropeTiles;
    const int head = blockIdx.x / tilesPerHead, pair0 = (blockIdx.x % tilesPerHead) * 8;
    const int vRow0 = (blockIdx.x - ropeTiles) * 16;  // v tiles: the first of their 16 rows within a token's v
    int row0, row1;
    if (rope) {
        const int pair = pair0 + g;
        row0 = head * headDim + (interleave ? 2 * pair : pair);
        row1 = head * headDim + (interleave ? 2 * pair + 1 : pair + half);
    } else {
        row0 = (qHeads + kvHeads) * headDim + vRow0 + g;
        row1 = row0 + 8;
    }
    skinny_sums<MT, U, PIPE>(x, w, row0, row1, M, K, releaseAttention != 0, partial);
    const int tokenElems = kvHeads * headDim;
    auto slot = [&](int m, int kv) {
        return pool_slot(layer, numPages, pageIdx[m], kv, pageSize, offsets[m], tokenElems);
    };
    if (rope) {
        // element i < 2 is the first of pair pair0 + g for token row 2t + i, element i + 2 its partner
        for (int e = threadIdx.x; e < MT * 2 * 32; e += blockDim.x) {
            const int l = e & 31, j2 = e >> 5, mt = j2 >> 1, i = j2 & 1;
            const int m = mt * 8 + 2 * (l & 3) + i;
            if (m >= M) continue;
            const float x1 = __bfloat162float(__float2bfloat16_rn(warp_order_sum<MT>(partial, mt * 4 + i, l)));
            const float x2 = __bfloat162float(__float2bfloat16_rn(warp_order_sum<MT>(partial, mt * 4 + i + 2, l)));
            const int pair = pair0 + (l >> 2);
            float sn, cs;
            sincosf((float)posIds[m] * invFreq[pair], &sn, &cs);
            __nv_bfloat16* dst = head < qHeads ? q + ((long long)m * qHeads + head) * headDim
                                               : pool + slot(m, 0) + (long long)(head - qHeads) * headDim;
            dst[interleave ? 2 * pair : pair] = __float2bfloat16_rn(rope_rotate(x1, x2, cs, sn, true));
            dst[interleave ? 2 * pair + 1 : pair + half] = __float2bfloat16_rn(rope_rotate(x1, x2, cs, sn, false));
        }
        return;
    }
    for (int e = threadIdx.x; e < MT * 4 * 32; e += blockDim.x) {
        const int l = e & 31, j = e >> 5, mt = j >> 2, i = j & 3;
        const int v = vRow0 + (l >> 2) + 8 * (i >> 1);
        const int m = mt * 8 + 2 * (l & 3) + (i & 1);
        if (m < M && v < tokenElems) pool[slot(m, 1) + v] = __float2bfloat16_rn(warp_order_sum<MT>(partial, j, l));
    }
}

}  // namespace

// Grid: ceil(N / 16) blocks of 32·kSkinnyWarps threads, or ceil(N / 2 / 8) gated. K must be a multiple of 64 and
// x, w 16-byte aligned (CudaMatmul checks both); outDt is the output's DTypeCode (fp32 or bf16); bias [N] of dtype
// biasDt or null (plain products only: a gated one takes none); act a SkinnyAct.
#define MSTAR_SKINNY_KERNEL(NAME, MT, U, PIPE)                                                                 \
    extern "C" __global__ void __launch_bounds__(32 * kSkinnyWarps) NAME(                                      \
        const __nv_bfloat16* x, const __nv_bfloat16* w, void* out, int outDt, const void* bias, int biasDt,     \
        int M, int N, int K, int act) {                                                                        \
        skinny_body<MT, U, PIPE>(x, w, out, outDt, bias, biasDt, M, N, K, act);                                \
    }
MSTAR_SKINNY_KERNEL(skinny_matmul_bf16_m1, 1, 4, false)
MSTAR_SKINNY_KERNEL(skinny_matmul_bf16_m2, 2, 2, false)
MSTAR_SKINNY_KERNEL(skinny_matmul_bf16_m4, 4, 2, false)
MSTAR_SKINNY_KERNEL(skinny_matmul_bf16_m1_pipe, 1, 2, true)
MSTAR_SKINNY_KERNEL(skinny_matmul_bf16_m2_pipe, 2, 1, true)

// Grid: (qHeads + 2·kvHeads)·headDim / 16 blocks of 32·kSkinnyWarps threads; headDim a multiple of 16, every dim
// rotated, bf16 x, w, q and pool (CudaMatmul.qkvRopeSkinny checks). The body is chosen as for the plain product
// of the same weight, so each sum visits K in the same order.
#define MSTAR_SKINNY_QKV_ROPE_KERNEL(NAME, MT, U, PIPE)                                                         \
    extern "C" __global__ void __launch_bounds__(32 * kSkinnyWarps) NAME(                                      \
        const __nv_bfloat16* x, const __nv_bfloat16* w, int M, int K, const int* posIds, const float* invFreq,  \
        __nv_bfloat16* q, __nv_bfloat16* pool, const int* pageIdx, const int* offsets, int layer, int numPages,  \
        int pageSize, int qHeads, int kvHeads, int headDim, int interleave, int releaseAttention) {             \
        skinny_qkv_rope_body<MT, U, PIPE>(x, w, M, K, posIds, invFreq, q, pool, pageIdx, offsets, layer, numPages, \
                                          pageSize, qHeads, kvHeads, headDim, interleave, releaseAttention);    \
    }
MSTAR_SKINNY_QKV_ROPE_KERNEL(skinny_qkv_rope_bf16_m1, 1, 4, false)
MSTAR_SKINNY_QKV_ROPE_KERNEL(skinny_qkv_rope_bf16_m2, 2, 2, false)
MSTAR_SKINNY_QKV_ROPE_KERNEL(skinny_qkv_rope_bf16_m4, 4, 2, false)
MSTAR_SKINNY_QKV_ROPE_KERNEL(skinny_qkv_rope_bf16_m1_pipe, 1, 2, true)
MSTAR_SKINNY_QKV_ROPE_KERNEL(skinny_qkv_rope_bf16_m2_pipe, 2, 1, true)
