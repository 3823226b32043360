// Decode-sized gate/up projection with the gated activation fused in: one pass over the weights for a few rows,
// no [rows, 2·inter] intermediate and no separate activation launch.
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

// One warp per output column j: the dot products of every row with weight rows j (gate) and inter + j (up),
// 8 elements per lane per step, then a warp reduction. The sums are rounded to out's dtype before the
// activation, as the unfused matmul → activation stores them.
template <int ROWS, bool VEC>
__device__ void gate_up_columns(const __nv_bfloat16* __restrict__ w, const void* __restrict__ x, int xDt,
                                void* __restrict__ out, int outDt, int inter, int k, int geluTanh) {
    const int lane = threadIdx.x & 31;
    const int j = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (j >= inter) return;
    const __nv_bfloat16* wg = w + (long long)j * k;
    const __nv_bfloat16* wu = w + (long long)(inter + j) * k;
    float g[ROWS], u[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; r++) g[r] = u[r] = 0.f;
#pragma unroll 4
    for (int c = lane * 8; c < k; c += 256) {
        float a[8], b[8];
        load8_bf16<VEC, true>(wg, c, a);
        load8_bf16<VEC, true>(wu, c, b);
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            float xv[8];
            load8_act<VEC>(x, xDt, (long long)r * k + c, xv);
#pragma unroll
            for (int e = 0; e < 8; e++) {
                g[r] = fmaf(a[e], xv[e], g[r]);
                u[r] = fmaf(b[e], xv[e], u[r]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        g[r] = warp_sum(g[r]);
        u[r] = warp_sum(u[r]);
    }
    if (lane == 0) {
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
