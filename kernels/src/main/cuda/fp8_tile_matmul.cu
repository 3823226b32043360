// FP8-weight products of 17 to 64 rows (decode at larger batches), tiled like a GEMM: fp8_skinny_matmul gives a block
// 16 weight rows and reads every row of x for them, so at 64 rows x is read again from L2 for each 16 output columns
// (eight times the weight's bytes). Here a block of 4 warps owns 128 weight rows (output columns), 32 a warp as two
// mma tiles, against all 8·MT rows of x, over one slice of K (split-K: blockIdx.y). Each 64-element chunk of k is a
// stage: its 128 × 64 weight codes and 8·MT × 64 x elements are copied to shared memory with cp.async, kTileStages - 1
// stages in flight while one is multiplied, so x crosses L2 once per 128 columns and the weight stream has no
// registers to wait in. A warp dequantises its codes in registers into the mma's weight fragments (fp8_dequantize.cuh:
// code · scale rounded once to bf16, the scale of the code's row and 64-element column block, exact for per-channel,
// per-tensor and 128 × 128 scales) and uses each x fragment for both of its weight tiles.
//
// Fragments as fp8_matmul.cu's: in a chunk, lane (g = lane / 4, t = lane % 4) takes codes 16t .. 16t + 15 of its tile
// rows g and g + 8 and elements 16t .. 16t + 15 of x row 8·mt + g; mma k-step s takes bf16 pairs 2s and 2s + 1.
//
// A column's sum visits its block's chunks in increasing order, then (split-K) fp8_tile_reduce adds the slices'
// partial sums in slice order: the order depends on N, K and the split count, never on the row count, so every row
// count from 17 to 64, through either instantiation, gives a row the same bits. The bias joins the fp32 sum before
// its one rounding.
#include "attention.cuh"
#include "common.cuh"
#include "fp8_dequantize.cuh"
#include "mma.cuh"

using namespace mstar;

namespace {

constexpr int kTileWarps = 4;
constexpr int kTileRows = 32 * kTileWarps;  // weight rows (output columns) of a block: two 16-row mma tiles a warp
constexpr int kTileChunk = 64;              // k elements of a stage (four mma k-steps)
constexpr int kTileStages = 4;              // shared-memory stages: kTileStages - 1 loading while one is multiplied
// Bytes of a staged x row: its 128 plus 16, so that the two rows a quarter-warp reads start in different banks.
constexpr int kTileXPitch = 2 * kTileChunk + 16;

template <int MT>
__host__ __device__ constexpr int tile_stage_bytes() {
    return kTileRows * kTileChunk + MT * 8 * kTileXPitch;
}

// Chunk c of the block's weight rows (codes [kTileRows][64]; rows past n zero-filled) and of x (8·MT rows of
// kTileXPitch bytes; rows past `rows` zero-filled, so they add zeros to their own columns only) into `stage`.
template <int MT>
__device__ __forceinline__ void tile_load(unsigned char* stage, const __nv_bfloat16* x, const unsigned char* codes,
                                          int n0, int rows, int n, int k, int c) {
    for (int v = threadIdx.x; v < kTileRows * 4; v += blockDim.x) {
        const int r = v >> 2, j = v & 3;
        const unsigned char* src = codes + (long long)min(n0 + r, n - 1) * k + c * kTileChunk + 16 * j;
        cp_async16(stage + r * kTileChunk + 16 * j, src, n0 + r < n);
    }
    unsigned char* xs = stage + kTileRows * kTileChunk;
    for (int v = threadIdx.x; v < MT * 8 * 8; v += blockDim.x) {
        const int r = v >> 3, j = v & 7;
        const __nv_bfloat16* src = x + (long long)min(r, rows - 1) * k + c * kTileChunk + 8 * j;
        cp_async16(xs + r * kTileXPitch + 16 * j, src, r < rows);
    }
}

// The warp's products of chunk c: its two weight tiles dequantised with their rows' scales s[tile][half], each x
// fragment loaded once for both.
template <int MT>
__device__ __forceinline__ void tile_mma(float (&acc)[2][MT][4], const unsigned char* stage,
                                         const float* const (&s)[2][2], int c, int blockCols) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    uint32_t p[2][2][8];
#pragma unroll
    for (int rt = 0; rt < 2; ++rt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = warp * 32 + 16 * rt + 8 * h + g;
            const uint4 a = *reinterpret_cast<const uint4*>(stage + r * kTileChunk + 16 * t);
            dequantize16(a, s[rt][h][c * kTileChunk / blockCols], p[rt][h]);
        }
    }
    const unsigned char* xs = stage + kTileRows * kTileChunk;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        const uint4* xr = reinterpret_cast<const uint4*>(xs + (mt * 8 + g) * kTileXPitch + 32 * t);
        const uint4 b[2] = {xr[0], xr[1]};
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
#pragma unroll
            for (int rt = 0; rt < 2; ++rt) {
                const uint32_t w[4] = {p[rt][0][2 * ks], p[rt][1][2 * ks], p[rt][0][2 * ks + 1], p[rt][1][2 * ks + 1]};
                mma_bf16(acc[rt][mt], w, fragment_word(b, 2 * ks), fragment_word(b, 2 * ks + 1));
            }
        }
    }
}

template <int MT>
__device__ __forceinline__ void fp8_tile_body(const __nv_bfloat16* __restrict__ x,
                                              const unsigned char* __restrict__ codes, const float* __restrict__ scales,
                                              int blockRows, int blockCols, const void* bias, int biasDt, void* out,
                                              int outDt, float* partial, int rows, int n, int k) {
    constexpr int kStageBytes = tile_stage_bytes<MT>();
    unsigned char* smem = dynamic_smem();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * kTileRows;
    const int chunks = k / kTileChunk, splits = gridDim.y;
    const int c0 = blockIdx.y * chunks / splits, c1 = (blockIdx.y + 1) * chunks / splits;
    const int scaleCols = (k + blockCols - 1) / blockCols;
    const float* s[2][2];
#pragma unroll
    for (int rt = 0; rt < 2; ++rt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            s[rt][h] = scales + (long long)(min(n0 + warp * 32 + 16 * rt + 8 * h + g, n - 1) / blockRows) * scaleCols;
        }
    }
    float acc[2][MT][4];
#pragma unroll
    for (int rt = 0; rt < 2; ++rt) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) acc[rt][mt][0] = acc[rt][mt][1] = acc[rt][mt][2] = acc[rt][mt][3] = 0.f;
    }

    await_previous_kernel();
    // every iteration commits one group (empty past the slice), so waiting for all but kTileStages - 2 groups
    // always means the oldest stage has landed
#pragma unroll
    for (int i = 0; i < kTileStages - 1; ++i) {
        if (c0 + i < c1) tile_load<MT>(smem + i * kStageBytes, x, codes, n0, rows, n, k, c0 + i);
        cp_async_commit();
    }
    for (int c = c0; c < c1; ++c) {
        cp_async_wait<kTileStages - 2>();
        __syncthreads();  // stage c landed for every thread; the stage refilled next was read last iteration
        const int next = c + kTileStages - 1;
        if (next < c1) tile_load<MT>(smem + ((next - c0) % kTileStages) * kStageBytes, x, codes, n0, rows, n, k, next);
        cp_async_commit();
        tile_mma<MT>(acc, smem + ((c - c0) % kTileStages) * kStageBytes, s, c, blockCols);
    }

    // accumulator element i of lane (g, t) in tiles (rt, mt) is weight row 16·rt + g + 8·(i / 2) of the warp's 32
    // and x row 8·mt + 2t + i % 2
#pragma unroll
    for (int rt = 0; rt < 2; ++rt) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int col = n0 + warp * 32 + 16 * rt + g + 8 * (i >> 1);
                const int m = mt * 8 + 2 * t + (i & 1);
                if (m >= rows || col >= n) continue;
                if (splits == 1) {
                    const float bv = bias != nullptr ? load_f(bias, biasDt, col) : 0.f;
                    store_f(out, outDt, (long long)m * n + col, acc[rt][mt][i] + bv);
                } else {
                    partial[((long long)blockIdx.y * rows + m) * n + col] = acc[rt][mt][i];
                }
            }
        }
    }
}

}  // namespace

// Grid: (ceil(n / 128), splits) blocks of 32·kTileWarps threads, kTileStages · tile_stage_bytes<MT>() bytes of dynamic
// shared memory. x bf16 [rows ≤ 8·MT, k] and codes 16-byte aligned, k and blockCols multiples of 64, splits at most
// k / 64; scales F32 [ceil(n / blockRows), ceil(k / blockCols)]; bias [n] of dtype biasDt or null; outDt fp32 or
// bf16. One split writes out; more write their sums to partial F32 [splits, rows, n] for fp8_tile_reduce.
#define MSTAR_FP8_TILE_KERNEL(NAME, MT)                                                                           \
    extern "C" __global__ void __launch_bounds__(32 * kTileWarps) NAME(                                           \
        const __nv_bfloat16* x, const unsigned char* codes, const float* scales, int blockRows, int blockCols,    \
        const void* bias, int biasDt, void* out, int outDt, float* partial, int rows, int n, int k) {             \
        fp8_tile_body<MT>(x, codes, scales, blockRows, blockCols, bias, biasDt, out, outDt, partial, rows, n, k); \
    }
MSTAR_FP8_TILE_KERNEL(fp8_tile_matmul_m4, 4)
MSTAR_FP8_TILE_KERNEL(fp8_tile_matmul_m8, 8)

// out[m, col] = the splits' partial sums of fp8_tile_matmul added in slice order, plus the bias, rounded once to out's
// dtype. partial F32 [splits, rows, n].
extern "C" __global__ void fp8_tile_reduce(const float* partial, int splits, const void* bias, int biasDt, void* out,
                                           int outDt, int rows, int n) {
    await_previous_kernel();
    const long long size = (long long)rows * n;
    MSTAR_GRID_LOOP(e, size) {
        float sum = partial[e];
        for (int s = 1; s < splits; ++s) sum += partial[s * size + e];
        const float bv = bias != nullptr ? load_f(bias, biasDt, e % n) : 0.f;
        store_f(out, outDt, e, sum + bv);
    }
}
