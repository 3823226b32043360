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
#include "skinny.cuh"

using namespace mstar;

namespace {

// The plain product's epilogue: none, or a gated activation (SkinnyMatmul.Activation).
enum SkinnyAct : int { ACT_NONE = 0, ACT_SILU = 1, ACT_GELU_TANH = 2 };

// The block's walk over K (skinny_walk) for weight rows row0 and row1 against the first M rows of x (M ≤ 8·MT).
template <int MT, int U, bool PIPE>
__device__ __forceinline__ void skinny_sums(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                                            int row0, int row1, int M, int K, bool releaseNext,
                                            float (&partial)[kSkinnyWarps][MT * 4][32]) {
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    const uint4* w0 = reinterpret_cast<const uint4*>(w + (long long)row0 * K) + 2 * t;
    const uint4* w1 = reinterpret_cast<const uint4*>(w + (long long)row1 * K) + 2 * t;
    const uint4* xr[MT];
    bool xLive[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        xLive[mt] = mt * 8 + g < M;
        xr[mt] = reinterpret_cast<const uint4*>(x + (long long)min(mt * 8 + g, M - 1) * K) + 2 * t;
    }

    await_previous_kernel();
    if (releaseNext) release_dependents();
    skinny_walk<MT, U, PIPE>(w0, w1, xr, xLive, K, partial);
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
