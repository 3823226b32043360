// Decode-sized projections (a few rows) with the next op fused into their epilogue: one pass over the weights,
// no intermediate tensor and no second launch. One warp computes two output columns for every row; the launchers
// send larger batches to cuBLAS and the unfused ops.
#include "common.cuh"

using namespace mstar;

namespace {

constexpr int GEMV_MAX_ROWS = 4;

// Eight consecutive elements starting at element i (a multiple of 8) as fp32; 16-byte loads when aligned.
// STREAM marks data read once per launch (the weights), which should not displace the reused activations.
template <bool VEC, bool STREAM>
__device__ __forceinline__ void load8_bf16(const __nv_bfloat16* p, long long i, float* v) {
    if (VEC) {
        const uint4* q = reinterpret_cast<const uint4*>(p + i);
        const uint4 raw = STREAM ? __ldcs(q) : __ldg(q);
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float2 f = __bfloat1622float2(h[e]);
            v[2 * e] = f.x;
            v[2 * e + 1] = f.y;
        }
    } else {
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = __bfloat162float(p[i + e]);
    }
}

template <bool VEC>
__device__ __forceinline__ void load8_act(const void* p, int dt, long long i, float* v) {
    if (dt == DT_BF16) {
        load8_bf16<VEC, false>(static_cast<const __nv_bfloat16*>(p), i, v);
    } else {
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = load_f(p, dt, i + e);
    }
}

__device__ __forceinline__ float gated(float g, float u, int geluTanh) {
    if (geluTanh) {
        const float k = 0.7978845608028654f;  // sqrt(2 / pi), as gelu_tanh_mul
        return 0.5f * g * (1.f + tanhf(k * (g + 0.044715f * g * g * g))) * u;
    }
    return g / (1.f + expf(-g)) * u;
}

// Sums of every row of x with weight rows c1 and c2 in fp32 (each lane's share of k in order, then a warp tree);
// every lane gets them. x [ROWS, k], w [*, k] bf16, k a multiple of 8.
template <int ROWS, bool VEC>
__device__ __forceinline__ void dot2(const __nv_bfloat16* __restrict__ w, long long c1, long long c2,
                                     const void* __restrict__ x, int xDt, int k, float* s1, float* s2) {
    const int lane = threadIdx.x & 31;
    const __nv_bfloat16* w1 = w + c1 * k;
    const __nv_bfloat16* w2 = w + c2 * k;
#pragma unroll
    for (int r = 0; r < ROWS; r++) s1[r] = s2[r] = 0.f;
#pragma unroll 4
    for (int c = lane * 8; c < k; c += 256) {
        float a[8], b[8];
        load8_bf16<VEC, true>(w1, c, a);
        load8_bf16<VEC, true>(w2, c, b);
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            float xv[8];
            load8_act<VEC>(x, xDt, (long long)r * k + c, xv);
#pragma unroll
            for (int e = 0; e < 8; e++) {
                s1[r] = fmaf(a[e], xv[e], s1[r]);
                s2[r] = fmaf(b[e], xv[e], s2[r]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        s1[r] = warp_sum(s1[r]);
        s2[r] = warp_sum(s2[r]);
    }
}

// Warp j: gate row j and up row inter + j. The sums are rounded to out's dtype before the activation, as the
// unfused matmul → activation stores them.
template <int ROWS, bool VEC>
__device__ void gate_up_columns(const __nv_bfloat16* __restrict__ w, const void* __restrict__ x, int xDt,
                                void* __restrict__ out, int outDt, int inter, int k, int geluTanh) {
    const int j = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (j >= inter) return;
    float g[ROWS], u[ROWS];
    dot2<ROWS, VEC>(w, j, (long long)inter + j, x, xDt, k, g, u);
    if ((threadIdx.x & 31) == 0) {
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            store_f(out, outDt, (long long)r * inter + j, gated(round_to(outDt, g[r]), round_to(outDt, u[r]), geluTanh));
        }
    }
}

template <bool VEC>
__device__ void gate_up_dispatch(const __nv_bfloat16* w, const void* x, int xDt, void* out, int outDt, int rows,
                                 int inter, int k, int geluTanh) {
    switch (rows) {
        case 1: gate_up_columns<1, VEC>(w, x, xDt, out, outDt, inter, k, geluTanh); break;
        case 2: gate_up_columns<2, VEC>(w, x, xDt, out, outDt, inter, k, geluTanh); break;
        case 3: gate_up_columns<3, VEC>(w, x, xDt, out, outDt, inter, k, geluTanh); break;
        default: gate_up_columns<GEMV_MAX_ROWS, VEC>(w, x, xDt, out, outDt, inter, k, geluTanh); break;
    }
}

}  // namespace

// out[r, j] = act(x[r]·w[j]) · (x[r]·w[inter + j]) for rows <= GEMV_MAX_ROWS; w bf16 [2·inter, k] (gate rows, then
// up rows, the fused weight's layout), x bf16 or f32 [rows, k], k a multiple of 8; act is SiLU, or GELU-tanh when
// geluTanh is set. The launcher sends larger batches to cuBLAS.
extern "C" __global__ void gate_up_act_gemv(const void* w, const void* x, int xDt, void* out, int outDt, int rows,
                                            int inter, int k, int geluTanh) {
    const bool aligned = ((reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(x)) & 15) == 0;
    const __nv_bfloat16* wb = static_cast<const __nv_bfloat16*>(w);
    if (aligned) {
        gate_up_dispatch<true>(wb, x, xDt, out, outDt, rows, inter, k, geluTanh);
    } else {
        gate_up_dispatch<false>(wb, x, xDt, out, outDt, rows, inter, k, geluTanh);
    }
}

namespace {

// Warp p: one pair of columns of one head of the fused qkv projection (heads: qHeads of q, kvHeads of k, kvHeads
// of v). In q and k heads the first rotaryDim/2 pairs are RoPE's pairs, rotated; the rest, and every pair of a v
// head, are two neighbouring dims passed through. Each value goes where qkv_rope_append would put it, through the
// same roundings: to qkvDt (what the unfused matmul stores), to q's dtype before rotating q, to qkvDt after
// rotating k, then to the pool's.
template <int ROWS, bool VEC>
__device__ void qkv_pairs(const __nv_bfloat16* __restrict__ w, const void* __restrict__ x, int xDt,
                          const void* __restrict__ bias, int biasDt, int qkvDt, const int* posIds, const float* invFreq,
                          void* q, int qDt, void* pool, int poolDt, const int* pageIdx, const int* offsets, int layer,
                          int numPages, int pageSize, int qHeads, int kvHeads, int headDim, int rotaryDim,
                          int interleave, int k) {
    const int pairsPerHead = headDim / 2;
    const int p = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (p >= (qHeads + 2 * kvHeads) * pairsPerHead) return;
    const int h = p / pairsPerHead, i = p - h * pairsPerHead;
    const int half = rotaryDim / 2;
    const bool roped = h < qHeads + kvHeads;
    const bool rotated = roped && i < half;
    int c1, c2;
    if (rotated) {
        c1 = interleave ? 2 * i : i;
        c2 = interleave ? 2 * i + 1 : i + half;
    } else {
        c1 = roped ? rotaryDim + 2 * (i - half) : 2 * i;
        c2 = c1 + 1;
    }
    const long long col1 = (long long)h * headDim + c1, col2 = (long long)h * headDim + c2;
    float a[ROWS], b[ROWS];
    dot2<ROWS, VEC>(w, col1, col2, x, xDt, k, a, b);
    if ((threadIdx.x & 31) != 0) return;
    const float bias1 = bias != nullptr ? load_f(bias, biasDt, col1) : 0.f;
    const float bias2 = bias != nullptr ? load_f(bias, biasDt, col2) : 0.f;
    const int tokenElems = kvHeads * headDim;
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        float x1 = round_to(qkvDt, a[r] + bias1), x2 = round_to(qkvDt, b[r] + bias2);
        float s = 0.f, c = 1.f;
        if (rotated) sincosf((float)posIds[r] * invFreq[i], &s, &c);
        if (h < qHeads) {
            x1 = round_to(qDt, x1);
            x2 = round_to(qDt, x2);
            const long long dst = ((long long)r * qHeads + h) * headDim;
            store_f(q, qDt, dst + c1, rotated ? x1 * c - x2 * s : x1);
            store_f(q, qDt, dst + c2, rotated ? x2 * c + x1 * s : x2);
        } else {
            const long long page = (long long)layer * numPages + pageIdx[r];
            const long long kOut = ((page * 2 + 0) * pageSize + offsets[r]) * tokenElems;
            if (roped) {
                const long long dst = kOut + (long long)(h - qHeads) * headDim;
                store_f(pool, poolDt, dst + c1, rotated ? round_to(qkvDt, x1 * c - x2 * s) : x1);
                store_f(pool, poolDt, dst + c2, rotated ? round_to(qkvDt, x2 * c + x1 * s) : x2);
            } else {
                const long long dst = kOut + (long long)pageSize * tokenElems + (long long)(h - qHeads - kvHeads) * headDim;
                store_f(pool, poolDt, dst + c1, x1);
                store_f(pool, poolDt, dst + c2, x2);
            }
        }
    }
}

template <bool VEC>
__device__ void qkv_dispatch(int rows, const __nv_bfloat16* w, const void* x, int xDt, const void* bias, int biasDt,
                             int qkvDt, const int* posIds, const float* invFreq, void* q, int qDt, void* pool,
                             int poolDt, const int* pageIdx, const int* offsets, int layer, int numPages, int pageSize,
                             int qHeads, int kvHeads, int headDim, int rotaryDim, int interleave, int k) {
#define MSTAR_QKV_PAIRS(R)                                                                                        \
    qkv_pairs<R, VEC>(w, x, xDt, bias, biasDt, qkvDt, posIds, invFreq, q, qDt, pool, poolDt, pageIdx, offsets,   \
                      layer, numPages, pageSize, qHeads, kvHeads, headDim, rotaryDim, interleave, k)
    switch (rows) {
        case 1: MSTAR_QKV_PAIRS(1); break;
        case 2: MSTAR_QKV_PAIRS(2); break;
        case 3: MSTAR_QKV_PAIRS(3); break;
        default: MSTAR_QKV_PAIRS(GEMV_MAX_ROWS); break;
    }
#undef MSTAR_QKV_PAIRS
}

}  // namespace

// The fused qkv projection (x [rows, k] · w [(qHeads + 2·kvHeads)·headDim, k]ᵀ + bias) followed by
// qkv_rope_append, for rows <= GEMV_MAX_ROWS: q rotated into q [rows, qHeads, headDim], rotated k and v straight
// into pool[layer, pageIdx[r], 0|1, offsets[r]]. w bf16, x bf16 or f32, k a multiple of 8, headDim even; qkvDt is
// the dtype the unfused projection would have stored.
extern "C" __global__ void qkv_rope_append_gemv(const void* w, const void* x, int xDt, const void* bias, int biasDt,
                                                int qkvDt, const int* posIds, const float* invFreq, void* q, int qDt,
                                                void* pool, int poolDt, const int* pageIdx, const int* offsets,
                                                int layer, int numPages, int pageSize, int rows, int qHeads,
                                                int kvHeads, int headDim, int rotaryDim, int interleave, int k) {
    const bool aligned = ((reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(x)) & 15) == 0;
    const __nv_bfloat16* wb = static_cast<const __nv_bfloat16*>(w);
    if (aligned) {
        qkv_dispatch<true>(rows, wb, x, xDt, bias, biasDt, qkvDt, posIds, invFreq, q, qDt, pool, poolDt, pageIdx,
                           offsets, layer, numPages, pageSize, qHeads, kvHeads, headDim, rotaryDim, interleave, k);
    } else {
        qkv_dispatch<false>(rows, wb, x, xDt, bias, biasDt, qkvDt, posIds, invFreq, q, qDt, pool, poolDt, pageIdx,
                            offsets, layer, numPages, pageSize, qHeads, kvHeads, headDim, rotaryDim, interleave, k);
    }
}
