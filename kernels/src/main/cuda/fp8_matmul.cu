// Products with FP8 weights (ProjectionOps.matmul with an Fp8Weight): w[n, k] is stored as E4M3 codes (OCP E4M3FN,
// torch.float8_e4m3fn) and a grid of fp32 scales, element (i, j) = decode(codes[i, j]) · scales[i / blockRows,
// j / blockCols]. Both kernels round that product once to bf16, the dtype the tensor cores multiply:
// fp8_skinny_matmul for up to 16 rows (decode) dequantises 16 codes a lane in registers straight into the mma's
// weight fragments, so a step reads one byte a weight (fp8_tile_matmul.cu does so for 17 to 64 rows);
// fp8_dequantize_bf16 writes the dequantised weight into a bf16 scratch that cuBLAS then multiplies (prefill, where
// the GEMM is bound by its FLOPs, not by the weight's bytes).
//
// fp8_skinny_matmul has skinny_matmul.cu's shape: a block of 8 warps takes a tile of 16 weight rows (the mma's A
// operand) and up to 8·MT rows of x (its B operand, MT 1 or 2), the warps splitting K in 64-element chunks, their
// partial tiles summed in shared memory in warp order. In each chunk lane (g = lane / 4, t = lane % 4) loads codes
// 16t .. 16t + 15 of weight rows g and g + 8 (one 16-byte load each) and elements 16t .. 16t + 15 of x row g; mma
// k-step s takes bf16 pairs 2s and 2s + 1 of those 16 elements, as skinny_matmul.cu's fragments do with bf16 weights.
#include <cuda_fp8.h>
#include "common.cuh"
#include "fp8_dequantize.cuh"
#include "mma.cuh"

using namespace mstar;

namespace {

constexpr int kFp8Warps = 8;
constexpr int kFp8Chunk = 64;  // k elements a warp consumes per group of four mma k-steps

// MT 8-row tiles of x (rows ≤ 8·MT), U chunks of k loaded per warp before their mma, RT 16-row tiles of weight rows a
// block (each warp takes the same chunks of every tile, so a column's sum visits k in the same order whatever RT is:
// RT only makes blocks longer). Weight rows past n (the last tile of an n that is not a multiple of 16·RT) reread
// row n - 1 and are not stored; x rows past `rows` read row rows - 1 and contribute zeros to their own columns. The
// bias joins the fp32 sum before its one rounding.
template <int MT, int U, int RT>
__device__ __forceinline__ void fp8_skinny_body(const __nv_bfloat16* __restrict__ x,
                                                const unsigned char* __restrict__ codes,
                                                const float* __restrict__ scales, int blockRows, int blockCols,
                                                const void* bias, int biasDt, void* out, int outDt, int rows, int n,
                                                int k) {
    __shared__ float partial[kFp8Warps][RT * MT * 4][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * 16 * RT;
    const int scaleCols = (k + blockCols - 1) / blockCols;
    // tile rt's weight rows g (h = 0) and g + 8 (h = 1) of this lane: their scales' row and their codes at 16t
    const float* s[RT][2];
    const uint4* w[RT][2];
#pragma unroll
    for (int rt = 0; rt < RT; ++rt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = min(n0 + 16 * rt + 8 * h + g, n - 1);
            s[rt][h] = scales + (long long)(row / blockRows) * scaleCols;
            w[rt][h] = reinterpret_cast<const uint4*>(codes + (long long)row * k) + t;
        }
    }
    const uint4* xr[MT];
    bool xLive[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        xLive[mt] = mt * 8 + g < rows;
        xr[mt] = reinterpret_cast<const uint4*>(x + (long long)min(mt * 8 + g, rows - 1) * k) + 2 * t;
    }
    const int chunks = k / kFp8Chunk;
    constexpr int kCodeVecs = kFp8Chunk / 16;  // 16-byte vectors of codes per row and chunk
    constexpr int kXVecs = kFp8Chunk / 8;      // 16-byte vectors of x per row and chunk

    await_previous_kernel();

    float acc[RT][MT][4];
#pragma unroll
    for (int rt = 0; rt < RT; ++rt) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) acc[rt][mt][0] = acc[rt][mt][1] = acc[rt][mt][2] = acc[rt][mt][3] = 0.f;
    }

    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (int c0 = warp * U; c0 < chunks; c0 += kFp8Warps * U) {
        uint4 a[U][RT][2], b[U][MT][2];
        float sc[U][RT][2];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (c0 + u < chunks) {
#pragma unroll
                for (int rt = 0; rt < RT; ++rt) {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        // the codes are read once per step: stream them past L1 (evict-first)
                        a[u][rt][h] = __ldcs(w[rt][h] + (c0 + u) * kCodeVecs);
                        sc[u][rt][h] = s[rt][h][(c0 + u) * kFp8Chunk / blockCols];
                    }
                }
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    b[u][mt][0] = __ldg(xr[mt] + (c0 + u) * kXVecs);
                    b[u][mt][1] = __ldg(xr[mt] + (c0 + u) * kXVecs + 1);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (c0 + u < chunks) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    b[u][mt][0] = xLive[mt] ? b[u][mt][0] : zero;
                    b[u][mt][1] = xLive[mt] ? b[u][mt][1] : zero;
                }
#pragma unroll
                for (int rt = 0; rt < RT; ++rt) {
                    uint32_t p0[8], p1[8];
                    dequantize16(a[u][rt][0], sc[u][rt][0], p0);
                    dequantize16(a[u][rt][1], sc[u][rt][1], p1);
#pragma unroll
                    for (int ks = 0; ks < 4; ++ks) {
                        const uint32_t wf[4] = {p0[2 * ks], p1[2 * ks], p0[2 * ks + 1], p1[2 * ks + 1]};
#pragma unroll
                        for (int mt = 0; mt < MT; ++mt) {
                            mma_bf16(acc[rt][mt], wf, fragment_word(b[u][mt], 2 * ks),
                                     fragment_word(b[u][mt], 2 * ks + 1));
                        }
                    }
                }
            }
        }
    }

#pragma unroll
    for (int rt = 0; rt < RT; ++rt) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
            for (int i = 0; i < 4; ++i) partial[warp][(rt * MT + mt) * 4 + i][lane] = acc[rt][mt][i];
        }
    }
    __syncthreads();
    // fragment element i of lane (g, t) in tiles (rt, mt) is weight row 16·rt + g + 8·(i / 2) and x row
    // 8·mt + 2t + i % 2
    for (int e = threadIdx.x; e < RT * MT * 4 * 32; e += blockDim.x) {
        const int l = e & 31, j = e >> 5, rt = j / (MT * 4), mt = (j >> 2) % MT, i = j & 3;
        const int col = n0 + 16 * rt + (l >> 2) + 8 * (i >> 1);
        const int m = mt * 8 + 2 * (l & 3) + (i & 1);
        if (m < rows && col < n) {
            float sum = 0.f;
#pragma unroll
            for (int q = 0; q < kFp8Warps; ++q) sum += partial[q][j][l];
            const float bv = bias != nullptr ? load_f(bias, biasDt, col) : 0.f;
            store_f(out, outDt, (long long)m * n + col, sum + bv);
        }
    }
}

}  // namespace

// Grid: ceil(n / (16·RT)) blocks of 32·kFp8Warps threads. x bf16 [rows, k] and codes 16-byte aligned, k and
// blockCols multiples of 64 (CudaFp8Matmul checks); scales F32 [ceil(n / blockRows), ceil(k / blockCols)]; bias [n]
// of dtype biasDt or null; outDt fp32 or bf16. The _r2 kernels give the same bits as their one-tile twins.
#define MSTAR_FP8_SKINNY_KERNEL(NAME, MT, U, RT)                                                                  \
    extern "C" __global__ void __launch_bounds__(32 * kFp8Warps) NAME(                                            \
        const __nv_bfloat16* x, const unsigned char* codes, const float* scales, int blockRows, int blockCols,    \
        const void* bias, int biasDt, void* out, int outDt, int rows, int n, int k) {                             \
        fp8_skinny_body<MT, U, RT>(x, codes, scales, blockRows, blockCols, bias, biasDt, out, outDt, rows, n, k);  \
    }
MSTAR_FP8_SKINNY_KERNEL(fp8_skinny_matmul_m1, 1, 4, 1)
MSTAR_FP8_SKINNY_KERNEL(fp8_skinny_matmul_m2, 2, 2, 1)
MSTAR_FP8_SKINNY_KERNEL(fp8_skinny_matmul_m1_r2, 1, 4, 2)
MSTAR_FP8_SKINNY_KERNEL(fp8_skinny_matmul_m2_r2, 2, 2, 2)

// The value of an E4M3 code, exact in fp32. Exponent 0 is subnormal; S.1111.111 is NaN; no infinities.
__device__ __forceinline__ float e4m3_to_float(unsigned b) {
    const unsigned exponent = (b >> 3) & 0xFu, mantissa = b & 7u;
    float magnitude;
    if (exponent == 0xFu && mantissa == 7u) {
        magnitude = NAN;
    } else if (exponent == 0u) {
        magnitude = (float)mantissa * 0x1.0p-9f;
    } else {
        magnitude = __uint_as_float(((exponent + 120u) << 23) | (mantissa << 20));
    }
    return (b & 0x80u) ? -magnitude : magnitude;
}

// out[n, k] = the dequantised weight in bf16, each element code · scale rounded once. Where k and blockCols are
// multiples of 16 a thread converts 16 codes (one 16-byte load, one scale) at a time into two 16-byte stores, the
// codes then 16-byte aligned (an allocation, or a view of whole rows of k bytes); otherwise one code at a time.
extern "C" __global__ void fp8_dequantize_bf16(const unsigned char* codes, const float* scales, int blockRows,
                                               int blockCols, __nv_bfloat16* out, int n, int k) {
    await_previous_kernel();
    const int scaleCols = (k + blockCols - 1) / blockCols;
    if (k % 16 == 0 && blockCols % 16 == 0) {
        const int vecsPerRow = k / 16;
        MSTAR_GRID_LOOP(v, (long long)n * vecsPerRow) {
            const long long row = v / vecsPerRow;
            const int col = (int)(v - row * vecsPerRow) * 16;
            uint32_t pairs[8];
            dequantize16(reinterpret_cast<const uint4*>(codes)[v], scales[row / blockRows * scaleCols + col / blockCols],
                         pairs);
            uint4* dst = reinterpret_cast<uint4*>(out) + 2 * v;
            dst[0] = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
            dst[1] = make_uint4(pairs[4], pairs[5], pairs[6], pairs[7]);
        }
        return;
    }
    MSTAR_GRID_LOOP(e, (long long)n * k) {
        const long long row = e / k;
        const int col = (int)(e - row * k);
        out[e] = __float2bfloat16_rn(e4m3_to_float(codes[e]) * scales[row / blockRows * scaleCols + col / blockCols]);
    }
}
