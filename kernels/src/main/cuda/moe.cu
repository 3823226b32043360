// Mixture-of-experts layers (MoeOps): the router, then the routed experts' gated MLPs grouped by expert.
//   moe_route      one warp per row: scores (softmax or sigmoid), DeepSeek-V2's group limit, top k, normalise, scale
//   moe_sort       one block: the row-choices ("assignments", a = row·k + j) sorted by expert, each expert's first
//                  sorted position, and the list of row tiles (each up to tileRows assignments of one expert) the
//                  tiled products run over
// Then one of four ways through the experts' products (CudaMoe chooses):
//   fp32 and odd widths, on the CUDA cores:
//     moe_gate_up  grouped GEMM: a tile of one expert's assignments × a tile of its gate and up rows, SiLU·mul in
//                  the epilogue, into h [assignments, I] in sorted order
//     moe_down     grouped GEMM: h × the expert's down rows, the routing weight applied in the epilogue, into
//                  y [assignments, H] (fp32) at each assignment's own place
//   bf16 at few rows (decode), on the tensor cores as streams over the chosen experts' weights (skinny.cuh):
//     moe_skinny_gate_up_m*, moe_skinny_down_m*  the same two products and epilogues, a block taking one tile of
//                  8 or 16 assignments and 16 weight rows of its expert, so each chosen expert's weights are read once
//                  for all the rows of a tile
//   bf16 at more than 16 assignments an expert (prefill), on the tensor cores as a grouped GEMM:
//     moe_grouped_gate_up[_m128], moe_grouped_down[_m128]  the same products and epilogues over tiles of up to 64
//                  (128) assignments of an expert and 128 weight rows, x rows gathered and weights staged by
//                  cp.async, mma.sync
//   bf16 at more than 64 assignments an expert on Hopper (sm_90a), the same grouped GEMM on the warpgroup products:
//     moe_wgmma_gate_up, moe_wgmma_down  tiles of up to 128 assignments and 256 weight rows, wgmma.mma_async from
//                  swizzled shared memory (wgmma.cuh) while the copies of the chunks ahead go on
//   bf16 at the most rows (large prefill chunks), on cuBLAS: moe_gather copies the assignments' rows of x into
//                  expert order (each expert's run of rows in sorted order, or in equal slots), the host runs the
//                  gate/up and down GEMMs
//                  over the runs (one strided batched GEMM over the slots, or one GEMM per expert; silu_mul between),
//                  and moe_combine_sorted weighs and sums them back
//   moe_combine    out[row] = Σ_j y[row·k + j], in the order of the row's choices
//   moe_local_ids  expert parallelism: the router's ids renumbered for one device's experts (-1 for another's)
// The reduction over a row's k experts is a pass of its own rather than atomics in moe_down's epilogue, so that the
// result does not depend on which tile finishes first (the engine's batch-invariance promise). Every launch size of
// the tiled ways is a function of the row count alone (empty tiles exit at once), so a recorded decode graph
// serves any routing; the cuBLAS way reads the experts' row counts back to the host and never runs in a graph.
// The CUDA-core GEMMs run in fp32 from shared-memory tiles; each output element is one thread's sum in index order.
#include "common.cuh"
#include "activations.cuh"
#include "attention.cuh"
#include "mma.cuh"
#include "skinny.cuh"
#include "wgmma.cuh"

#include <type_traits>

using namespace mstar;

constexpr int kMoeMaxExperts = 512;
constexpr int kMoeTileRows = 16;
// gate/up: 32 intermediate columns a tile, i.e. 64 weight rows (32 gate, 32 up); down: 64 output columns a tile
constexpr int kMoeGateUpCols = 32;
constexpr int kMoeDownCols = 64;
constexpr int kMoeDepth = 64;
constexpr int kMoeThreads = 256;
constexpr int kMoeSortThreads = 1024;

// The warp's largest (value, index) pair, the lower index on ties; index `none` marks a lane without a candidate.
__device__ __forceinline__ void warp_argmax(float& best, int& at, int none) {
    for (int o = 16; o > 0; o >>= 1) {
        const float b = __shfl_xor_sync(0xffffffffu, best, o);
        const int i = __shfl_xor_sync(0xffffffffu, at, o);
        if (i != none && (at == none || b > best || (b == best && i < at))) {
            best = b;
            at = i;
        }
    }
}

// One warp per row (blockIdx.x). Scores live in shared memory; each pick is a warp argmax (ties to the lower index).
extern "C" __global__ void moe_route(const float* logits, int experts, int sigmoidScores, int topK, int normalize,
                                     int groups, int topkGroups, float scaling, int* ids, float* weights) {
    await_previous_kernel();
    __shared__ float s[kMoeMaxExperts];
    __shared__ float groupBest[kMoeMaxExperts];
    __shared__ int chosen[kMoeMaxExperts];
    const int lane = threadIdx.x;
    const long long row = blockIdx.x;
    float mx = -INFINITY;
    for (int e = lane; e < experts; e += 32) {
        s[e] = logits[row * experts + e];
        mx = fmaxf(mx, s[e]);
    }
    if (sigmoidScores) {
        for (int e = lane; e < experts; e += 32) s[e] = 1.f / (1.f + expf(-s[e]));
    } else {
        mx = warp_max(mx);
        float sum = 0.f;
        for (int e = lane; e < experts; e += 32) {
            s[e] = expf(s[e] - mx);
            sum += s[e];
        }
        sum = warp_sum(sum);
        for (int e = lane; e < experts; e += 32) s[e] /= sum;
    }
    __syncwarp();
    if (groups > 1) {
        const int size = experts / groups;
        for (int g = lane; g < groups; g += 32) {
            float best = -INFINITY;
            for (int e = g * size; e < (g + 1) * size; e++) best = fmaxf(best, s[e]);
            groupBest[g] = best;
            chosen[g] = 0;
        }
        __syncwarp();
        for (int pick = 0; pick < topkGroups; pick++) {
            float best = -INFINITY;
            int at = groups;
            for (int g = lane; g < groups; g += 32) {
                if (!chosen[g] && (at == groups || groupBest[g] > best)) {
                    best = groupBest[g];
                    at = g;
                }
            }
            warp_argmax(best, at, groups);
            if (lane == 0) chosen[at] = 1;
            __syncwarp();
        }
        // experts outside the chosen groups are no candidates
        for (int e = lane; e < experts; e += 32) {
            if (!chosen[e / size]) s[e] = -INFINITY;
        }
        __syncwarp();
    }
    __shared__ float picked[kMoeMaxExperts];
    float total = 0.f;
    for (int j = 0; j < topK; j++) {
        float best = -INFINITY;
        int at = experts;
        for (int e = lane; e < experts; e += 32) {
            if (at == experts || s[e] > best) {
                best = s[e];
                at = e;
            }
        }
        warp_argmax(best, at, experts);
        // every lane now holds the pick; taken experts drop to -inf, below every score
        total += best;
        if (lane == 0) {
            ids[row * topK + j] = at;
            picked[j] = best;
            s[at] = -INFINITY;
        }
        __syncwarp();
    }
    for (int j = lane; j < topK; j += 32) {
        const float v = normalize ? picked[j] / total : picked[j];
        weights[row * topK + j] = v * scaling;
    }
}

// The exclusive prefix sum of v over the block's threads in thread order (every thread of the block calls it; sums
// holds a value per warp). Warp sums by shuffles, then the warps' totals by warp 0.
__device__ __forceinline__ int block_exclusive_sum(int v, int* sums) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int w = lane < (int)(blockDim.x >> 5) ? sums[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        sums[lane] = w;
    }
    __syncthreads();
    return x - v + (warp > 0 ? sums[warp - 1] : 0);
}

// One block of kMoeSortThreads. sorted[p] = the assignment at sorted position p, grouped by expert in expert order
// (within an expert in any order: each output row's sums do not depend on its neighbours in a tile), and
// expertStart[e] the sorted position of expert e's first assignment (expertStart[experts]: the number sorted).
// tileStart[t] is the sorted position of tile t's first row (tiles of up to tileRows rows) and tileExpert[t] its
// expert; tiles[0] is their number and tiles[1] the number of sorted assignments. Ids outside [0, experts) are left
// out (the combines make their rows NaN). Thread e counts expert e's places and tiles, and two block-wide prefix
// sums give every expert its first place and first tile at once (one thread walking the experts cost a decode
// step about 10 µs a sparse layer).
extern "C" __global__ void __launch_bounds__(kMoeSortThreads) moe_sort(const int* ids, int assignments, int experts,
                                                                       int tileRows, int* sorted, int* expertStart,
                                                                       int* tileStart, int* tileExpert, int* tiles) {
    await_previous_kernel();
    static_assert(kMoeMaxExperts <= kMoeSortThreads, "a thread per expert");
    __shared__ int count[kMoeMaxExperts];
    __shared__ int cursor[kMoeMaxExperts];
    __shared__ int placeSums[kMoeSortThreads / 32];
    __shared__ int tileSums[kMoeSortThreads / 32];
    for (int e = threadIdx.x; e < experts; e += blockDim.x) count[e] = 0;
    __syncthreads();
    for (int a = threadIdx.x; a < assignments; a += blockDim.x) {
        const int e = ids[a];
        if (e >= 0 && e < experts) atomicAdd(&count[e], 1);
    }
    __syncthreads();
    const int e = threadIdx.x;
    const int n = e < experts ? count[e] : 0;
    const int expertTiles = (n + tileRows - 1) / tileRows;
    const int first = block_exclusive_sum(n, placeSums);
    const int firstTile = block_exclusive_sum(expertTiles, tileSums);
    if (e < experts) {
        cursor[e] = first;
        expertStart[e] = first;
        for (int r = 0, t = firstTile; r < n; r += tileRows, t++) {
            tileStart[t] = first + r;
            tileExpert[t] = e;
        }
        if (e == experts - 1) {
            expertStart[experts] = first + n;
            tiles[0] = firstTile + expertTiles;
            tiles[1] = first + n;
        }
    }
    __syncthreads();
    for (int a = threadIdx.x; a < assignments; a += blockDim.x) {
        const int e = ids[a];
        if (e >= 0 && e < experts) sorted[atomicAdd(&cursor[e], 1)] = a;
    }
}

// Rows of tile `tile`: up to tileRows, fewer in an expert's last tile (the next tile starts at the next expert).
__device__ __forceinline__ int moe_tile_rows(const int* tileStart, const int* tiles, int tile, int tileRows) {
    const int end = tile + 1 < tiles[0] ? tileStart[tile + 1] : tiles[1];
    return min(tileRows, end - tileStart[tile]);
}

// Grouped gate/up GEMM with SiLU·mul: blockIdx.x = tile · colTiles + colTile. Thread t owns weight row c = t % 64 of
// the tile (gate rows 0-31, up rows 32-63) and rows t / 64 + 4i of the tile; partial sums meet in shared memory for
// the epilogue. Gate and up are rounded to h's dtype before the activation, as gateUpActivation does.
extern "C" __global__ void __launch_bounds__(kMoeThreads) moe_gate_up(const void* x, int xDt, const void* gateUp,
                                                                      int wDt, const int* sorted,
                                                                      const int* tileStart, const int* tileExpert,
                                                                      const int* tiles, void* h, int hDt, int topK,
                                                                      int hidden, int inter) {
    await_previous_kernel();
    const int colTiles = (inter + kMoeGateUpCols - 1) / kMoeGateUpCols;
    const int tile = blockIdx.x / colTiles;
    const int col0 = (blockIdx.x - tile * colTiles) * kMoeGateUpCols;
    if (tile >= tiles[0]) return;
    const int rows = moe_tile_rows(tileStart, tiles, tile, kMoeTileRows);
    const int first = tileStart[tile];
    const long long expert = tileExpert[tile];
    __shared__ float xs[kMoeTileRows][kMoeDepth];
    __shared__ float ws[2 * kMoeGateUpCols][kMoeDepth + 1];
    __shared__ float acc[kMoeTileRows][2 * kMoeGateUpCols];
    __shared__ long long tokenRow[kMoeTileRows];
    const int t = threadIdx.x;
    if (t < kMoeTileRows) tokenRow[t] = t < rows ? (long long)(sorted[first + t] / topK) : -1;
    const int c = t % (2 * kMoeGateUpCols), r0 = t / (2 * kMoeGateUpCols);
    float sum[kMoeTileRows / 4] = {0.f, 0.f, 0.f, 0.f};
    __syncthreads();
    for (int k0 = 0; k0 < hidden; k0 += kMoeDepth) {
        for (int i = t; i < kMoeTileRows * kMoeDepth; i += kMoeThreads) {
            const int r = i / kMoeDepth, kk = k0 + i % kMoeDepth;
            xs[r][i % kMoeDepth] = tokenRow[r] >= 0 && kk < hidden ? load_f(x, xDt, tokenRow[r] * hidden + kk) : 0.f;
        }
        for (int i = t; i < 2 * kMoeGateUpCols * kMoeDepth; i += kMoeThreads) {
            const int wc = i / kMoeDepth, kk = k0 + i % kMoeDepth;
            const int wcol = col0 + (wc % kMoeGateUpCols);
            const long long row = expert * 2 * inter + (wc < kMoeGateUpCols ? 0 : inter) + wcol;
            ws[wc][i % kMoeDepth] = wcol < inter && kk < hidden ? load_f(gateUp, wDt, row * hidden + kk) : 0.f;
        }
        __syncthreads();
        const int depth = min(kMoeDepth, hidden - k0);
        for (int kk = 0; kk < depth; kk++) {
            const float w = ws[c][kk];
#pragma unroll
            for (int i = 0; i < kMoeTileRows / 4; i++) sum[i] += xs[r0 + 4 * i][kk] * w;
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kMoeTileRows / 4; i++) acc[r0 + 4 * i][c] = sum[i];
    __syncthreads();
    for (int i = t; i < kMoeTileRows * kMoeGateUpCols; i += kMoeThreads) {
        const int r = i / kMoeGateUpCols, j = i % kMoeGateUpCols;
        if (r < rows && col0 + j < inter) {
            const float g = round_to(hDt, acc[r][j]), u = round_to(hDt, acc[r][kMoeGateUpCols + j]);
            store_f(h, hDt, (long long)(first + r) * inter + col0 + j, silu_times(g, u));
        }
    }
}

// Grouped down GEMM: blockIdx.x = tile · colTiles + colTile; thread t owns output column t % 64 and rows t / 64 + 4i
// of the tile. The epilogue multiplies by the assignment's routing weight and stores fp32 at the assignment's place.
extern "C" __global__ void __launch_bounds__(kMoeThreads) moe_down(const void* h, int hDt, const void* down, int wDt,
                                                                   const int* sorted, const int* tileStart,
                                                                   const int* tileExpert, const int* tiles,
                                                                   const float* weights, float* y, int hidden,
                                                                   int inter) {
    await_previous_kernel();
    const int colTiles = (hidden + kMoeDownCols - 1) / kMoeDownCols;
    const int tile = blockIdx.x / colTiles;
    const int col0 = (blockIdx.x - tile * colTiles) * kMoeDownCols;
    if (tile >= tiles[0]) return;
    const int rows = moe_tile_rows(tileStart, tiles, tile, kMoeTileRows);
    const int first = tileStart[tile];
    const long long expert = tileExpert[tile];
    __shared__ float hs[kMoeTileRows][kMoeDepth];
    __shared__ float ws[kMoeDownCols][kMoeDepth + 1];
    const int t = threadIdx.x;
    const int c = t % kMoeDownCols, r0 = t / kMoeDownCols;
    float sum[kMoeTileRows / 4] = {0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < inter; k0 += kMoeDepth) {
        for (int i = t; i < kMoeTileRows * kMoeDepth; i += kMoeThreads) {
            const int r = i / kMoeDepth, kk = k0 + i % kMoeDepth;
            hs[r][i % kMoeDepth] = r < rows && kk < inter ? load_f(h, hDt, (long long)(first + r) * inter + kk) : 0.f;
        }
        for (int i = t; i < kMoeDownCols * kMoeDepth; i += kMoeThreads) {
            const int wc = i / kMoeDepth, kk = k0 + i % kMoeDepth;
            const long long row = expert * hidden + col0 + wc;
            ws[wc][i % kMoeDepth] = col0 + wc < hidden && kk < inter ? load_f(down, wDt, row * inter + kk) : 0.f;
        }
        __syncthreads();
        const int depth = min(kMoeDepth, inter - k0);
        for (int kk = 0; kk < depth; kk++) {
            const float w = ws[c][kk];
#pragma unroll
            for (int i = 0; i < kMoeTileRows / 4; i++) sum[i] += hs[r0 + 4 * i][kk] * w;
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kMoeTileRows / 4; i++) {
        const int r = r0 + 4 * i;
        if (r < rows && col0 + c < hidden) {
            const int a = sorted[first + r];
            y[(long long)a * hidden + col0 + c] = weights[a] * sum[i];
        }
    }
}

// out[row, o] = Σ_j y[row·k + j, o] in choice order, rounded once to out's dtype. An id of -1 (an expert on another
// device, moe_local_ids) adds nothing; any other id outside [0, experts) makes the row NaN, so a bad id shows
// downstream instead of reading another expert's rows. A thread takes kMoeCombineRun outputs with 16-byte loads where
// hidden is a multiple of it (the combine reads topK fp32 rows an output row: it is a pass over memory), one
// otherwise; each output is the same sum either way. Launched over rows · hidden / moe_combine_run(hidden) items.
constexpr int kMoeCombineRun = 4;
__host__ __device__ constexpr int moe_combine_run(int hidden) { return hidden % kMoeCombineRun == 0 ? kMoeCombineRun : 1; }

// Choices a thread of the combines loads before it adds the first: the loads of a batch are in flight together (one
// after another, each a trip to memory, they bounded the combine), and the sum still runs in choice order.
constexpr int kMoeCombineBatch = 8;

template <int Run, class Source>
__device__ __forceinline__ void moe_combine_run_into(long long item, int hidden, int topK, const int* ids, int experts,
                                                     void* out, int outDt, Source source) {
    const long long e0 = item * Run;
    const long long row = e0 / hidden;
    const int o = (int)(e0 - row * hidden);
    float acc[Run];
#pragma unroll
    for (int i = 0; i < Run; i++) acc[i] = 0.f;
    for (int j0 = 0; j0 < topK; j0 += kMoeCombineBatch) {
        int id[kMoeCombineBatch];
        float v[kMoeCombineBatch][Run];
#pragma unroll
        for (int b = 0; b < kMoeCombineBatch; b++) {
            const long long a = row * topK + j0 + b;
            id[b] = j0 + b < topK ? ids[a] : -1;
            if (id[b] >= 0 && id[b] < experts) {
                source(a, o, v[b]);
            } else {
#pragma unroll
                for (int i = 0; i < Run; i++) v[b][i] = 0.f;
            }
        }
#pragma unroll
        for (int b = 0; b < kMoeCombineBatch; b++) {
            if (id[b] == -1) continue;
#pragma unroll
            for (int i = 0; i < Run; i++) acc[i] = id[b] < 0 || id[b] >= experts ? NAN : acc[i] + v[b][i];
        }
    }
#pragma unroll
    for (int i = 0; i < Run; i++) store_f(out, outDt, e0 + i, acc[i]);
}

// y's Run values of assignment a from column o (16 bytes at once for a run of 4), times `scale`.
template <int Run>
__device__ __forceinline__ void moe_combine_load(const float* y, long long rowStart, int o, float scale,
                                                 float (&v)[Run]) {
    if constexpr (Run == kMoeCombineRun) {
        const float4 q = *reinterpret_cast<const float4*>(y + rowStart + o);
        // the products rounded on their own (no fused multiply-add into the sum), as the one-output form
        v[0] = __fmul_rn(scale, q.x), v[1] = __fmul_rn(scale, q.y), v[2] = __fmul_rn(scale, q.z);
        v[3] = __fmul_rn(scale, q.w);
    } else {
        v[0] = __fmul_rn(scale, y[rowStart + o]);
    }
}

// The combine of item `item` in runs of 4 outputs where hidden allows, else of one.
template <class Source>
__device__ __forceinline__ void moe_combine_item(long long item, int hidden, int topK, const int* ids, int experts,
                                                 void* out, int outDt, Source source) {
    if (moe_combine_run(hidden) == kMoeCombineRun) {
        moe_combine_run_into<kMoeCombineRun>(item, hidden, topK, ids, experts, out, outDt, source);
    } else {
        moe_combine_run_into<1>(item, hidden, topK, ids, experts, out, outDt, source);
    }
}

extern "C" __global__ void moe_combine(const float* y, const int* ids, int experts, void* out, int outDt,
                                       long long rows, int hidden, int topK) {
    await_previous_kernel();
    MSTAR_GRID_LOOP(item, rows * hidden / moe_combine_run(hidden)) {
        // y already holds the routing weight's product: a multiplication by 1 leaves it as it was
        moe_combine_item(item, hidden, topK, ids, experts, out, outDt, [&](long long a, int o, auto& v) {
            moe_combine_load(y, a * hidden, o, 1.f, v);
        });
    }
}

// Expert parallelism: ids of the router's numbering renumbered for a device holding experts [first, first + count):
// id - first for its own, -1 for another device's (moe_sort leaves those out, moe_combine adds nothing for them).
extern "C" __global__ void moe_local_ids(const int* ids, int first, int count, int* local, long long n) {
    await_previous_kernel();
    MSTAR_GRID_LOOP(i, n) {
        const int e = ids[i];
        local[i] = e >= first && e < first + count ? e - first : -1;
    }
}

// The decode products on the tensor cores. A block takes tile `tile` of up to 8·MT assignments of one expert (moe_sort
// with tileRows = 8·MT) as the walk's x columns and 16 rows of the expert's weight, so a chosen expert's weights are
// read once for all the rows of a tile. bf16 x, weights and h; hidden and inter multiples of 64; 16-byte aligned.
// Each sum visits K as the skinny matmul's, and the epilogues are moe_gate_up's and moe_down's.

// The walk's x pointers for a tile whose columns are rows `first + p` (p < rows) of `x` through `row(p)`.
template <int MT, typename Row>
__device__ __forceinline__ void moe_tile_columns(const __nv_bfloat16* x, int K, int rows, Row row,
                                                 const uint4* (&xr)[MT], bool (&xLive)[MT]) {
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        const int p = mt * 8 + g;
        xLive[mt] = p < rows;
        xr[mt] = reinterpret_cast<const uint4*>(x + row(min(p, rows - 1)) * K) + 2 * t;
    }
}

// What a block of a skinny or grouped product serves, blockIdx.x = tile · colTiles + colTile: columns col0 .. col0 +
// cols - 1 of the tile's `rows` assignments from sorted position `first`, and its expert's weights `w` (`expertSize`
// elements an expert from `weights`).
struct MoeSkinnyTile {
    int col0, rows, first;
    const __nv_bfloat16* w;
    bool live;  // false: a block past the sorted tiles (the grid is sized for the most a call can have)

    template <int MT>
    __device__ __forceinline__ static MoeSkinnyTile of(const int* tileStart, const int* tileExpert, const int* tiles,
                                                       int width, int cols, const __nv_bfloat16* weights,
                                                       long long expertSize) {
        MoeSkinnyTile b;
        const int colTiles = (width + cols - 1) / cols;
        const int tile = blockIdx.x / colTiles;
        b.col0 = (blockIdx.x - tile * colTiles) * cols;
        b.live = tile < tiles[0];
        if (!b.live) return b;
        b.rows = moe_tile_rows(tileStart, tiles, tile, 8 * MT);
        b.first = tileStart[tile];
        b.w = weights + tileExpert[tile] * expertSize;
        return b;
    }
};

// gate/up: blockIdx.x = tile · ceil(inter / 8) + colTile; the tile's weight rows 0-7 are gate rows col0 .. col0 + 7 and
// rows 8-15 the up rows of the same columns (as the skinny matmul's gated tiles). h [assignments, inter] in sorted
// order, gate and up rounded to bf16 before SiLU·mul.
template <int MT, int U>
__device__ __forceinline__ void moe_skinny_gate_up_body(const __nv_bfloat16* x, const __nv_bfloat16* gateUp,
                                                        const int* sorted, const int* tileStart, const int* tileExpert,
                                                        const int* tiles, __nv_bfloat16* h, int topK, int hidden,
                                                        int inter) {
    __shared__ float partial[kSkinnyWarps][MT * 4][32];
    await_previous_kernel();
    const auto tile = MoeSkinnyTile::of<MT>(tileStart, tileExpert, tiles, inter, 8, gateUp, 2LL * inter * hidden);
    if (!tile.live) return;
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    const int col = min(tile.col0 + g, inter - 1);
    const uint4* w0 = reinterpret_cast<const uint4*>(tile.w + (long long)col * hidden) + 2 * t;
    const uint4* w1 = reinterpret_cast<const uint4*>(tile.w + (long long)(inter + col) * hidden) + 2 * t;
    const uint4* xr[MT];
    bool xLive[MT];
    moe_tile_columns<MT>(x, hidden, tile.rows, [&](int p) { return (long long)(sorted[tile.first + p] / topK); }, xr,
                         xLive);
    skinny_walk<MT, U, true>(w0, w1, xr, xLive, hidden, partial);
    // element i < 2 is the gate sum of column col0 + g for tile row 2t + i, element i + 2 the up sum of the same column
    for (int e = threadIdx.x; e < MT * 2 * 32; e += blockDim.x) {
        const int l = e & 31, j2 = e >> 5, mt = j2 >> 1, i = j2 & 1;
        const int n = tile.col0 + (l >> 2);
        const int m = mt * 8 + 2 * (l & 3) + i;
        if (m < tile.rows && n < inter) {
            const float gate = round_to(DT_BF16, warp_order_sum<MT>(partial, mt * 4 + i, l));
            const float up = round_to(DT_BF16, warp_order_sum<MT>(partial, mt * 4 + i + 2, l));
            h[(long long)(tile.first + m) * inter + n] = __float2bfloat16_rn(silu_times(gate, up));
        }
    }
}

// down: blockIdx.x = tile · ceil(hidden / 16) + colTile: output columns col0 .. col0 + 15 of the tile's rows of h; the
// epilogue multiplies by the assignment's routing weight and stores fp32 at the assignment's place in y.
template <int MT, int U>
__device__ __forceinline__ void moe_skinny_down_body(const __nv_bfloat16* h, const __nv_bfloat16* down,
                                                     const int* sorted, const int* tileStart, const int* tileExpert,
                                                     const int* tiles, const float* weights, float* y, int hidden,
                                                     int inter) {
    __shared__ float partial[kSkinnyWarps][MT * 4][32];
    await_previous_kernel();
    const auto tile = MoeSkinnyTile::of<MT>(tileStart, tileExpert, tiles, hidden, 16, down, (long long)hidden * inter);
    if (!tile.live) return;
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    const uint4* w0 =
        reinterpret_cast<const uint4*>(tile.w + (long long)min(tile.col0 + g, hidden - 1) * inter) + 2 * t;
    const uint4* w1 =
        reinterpret_cast<const uint4*>(tile.w + (long long)min(tile.col0 + g + 8, hidden - 1) * inter) + 2 * t;
    const uint4* xr[MT];
    bool xLive[MT];
    moe_tile_columns<MT>(h, inter, tile.rows, [&](int p) { return (long long)(tile.first + p); }, xr, xLive);
    skinny_walk<MT, U, true>(w0, w1, xr, xLive, inter, partial);
    for (int e = threadIdx.x; e < MT * 4 * 32; e += blockDim.x) {
        const int l = e & 31, j = e >> 5, mt = j >> 2, i = j & 3;
        const int n = tile.col0 + (l >> 2) + 8 * (i >> 1);
        const int m = mt * 8 + 2 * (l & 3) + (i & 1);
        if (m < tile.rows && n < hidden) {
            const int a = sorted[tile.first + m];
            y[(long long)a * hidden + n] = weights[a] * warp_order_sum<MT>(partial, j, l);
        }
    }
}

// Grid: maxTiles · ceil(inter / 8) blocks (gate/up) or maxTiles · ceil(hidden / 16) (down) of 32·kSkinnyWarps
// threads; the tiles of moe_sort with tileRows = 8·MT. The pipelined walk: K is short here (a few chunks a warp).
#define MSTAR_MOE_SKINNY_KERNELS(SUFFIX, MT, U)                                                                    \
    extern "C" __global__ void __launch_bounds__(32 * kSkinnyWarps) moe_skinny_gate_up_##SUFFIX(                  \
        const __nv_bfloat16* x, const __nv_bfloat16* gateUp, const int* sorted, const int* tileStart,              \
        const int* tileExpert, const int* tiles, __nv_bfloat16* h, int topK, int hidden, int inter) {              \
        moe_skinny_gate_up_body<MT, U>(x, gateUp, sorted, tileStart, tileExpert, tiles, h, topK, hidden, inter);   \
    }                                                                                                              \
    extern "C" __global__ void __launch_bounds__(32 * kSkinnyWarps) moe_skinny_down_##SUFFIX(                     \
        const __nv_bfloat16* h, const __nv_bfloat16* down, const int* sorted, const int* tileStart,                \
        const int* tileExpert, const int* tiles, const float* weights, float* y, int hidden, int inter) {          \
        moe_skinny_down_body<MT, U>(h, down, sorted, tileStart, tileExpert, tiles, weights, y, hidden, inter);     \
    }
MSTAR_MOE_SKINNY_KERNELS(m1, 1, 2)
MSTAR_MOE_SKINNY_KERNELS(m2, 2, 1)

// The prefill products on the tensor cores, a grouped GEMM over moe_sort's tiles of up to Rows assignments of one
// expert (tileRows = Rows, 64 or 128): a block of Rows / 16 warps multiplies a tile's gathered rows by kMoeGroupCols
// rows of its expert's weight, so an expert's weights cross L2 once per Rows of its assignments instead of once per 16
// (the skinny tiles). Each 64-element chunk of K is a stage: the tile's rows and the weight rows are copied to shared
// memory with cp.async, kMoeGroupStages - 1 stages in flight while one is multiplied; the warps (Rows / 32 × 2) each
// take 32 rows × 64 weight rows as mma.sync m16n8k16 tiles fed by ldmatrix. 128-row tiles move a third less through
// L2 for each product (a 64 × 128 block's stage feeds 1 MFLOP with 24 KB, a 128 × 128 block's 2 MFLOP with 32 KB),
// which is what bounds the 64-row blocks at prefill sizes; 64-row tiles waste less on experts with few rows. The tile
// list lives on the device and the grid is sized for the most tiles a row count can have (blocks past the list exit),
// so nothing is read back and the launch can be captured into a graph. bf16 x, weights and h; hidden and inter
// multiples of 64; 16-byte aligned.
//
// A sum visits K in chunks in increasing order, each chunk as four mma k-steps: every output element is the same
// sequence of fp32 operations whatever the tile's other rows, the row's place in its tile, the tile size or the row
// count, so a row gets the same bits from any routing of the other rows and any batch it is part of. The epilogues
// are moe_gate_up's (gate and up rounded to bf16 before SiLU·mul) and moe_down's (the routing weight times the fp32
// sum into y).
constexpr int kMoeGroupRows = 64;
constexpr int kMoeGroupLargeRows = 128;
constexpr int kMoeGroupCols = 128;
constexpr int kMoeGroupChunk = 64;
constexpr int kMoeGroupStages = 3;
// Two threads a tile row: warps of 32 rows × 64 weight rows, two warp columns.
constexpr int kMoeGroupThreads = 2 * kMoeGroupRows;
constexpr int kMoeGroupLargeThreads = 2 * kMoeGroupLargeRows;
// Bytes of a staged row: its 128 plus 16, so that the 8 rows an ldmatrix reads start in different banks.
constexpr int kMoeGroupPitch = 2 * kMoeGroupChunk + 16;
__host__ __device__ constexpr int moe_group_stage_bytes(int rows) { return (rows + kMoeGroupCols) * kMoeGroupPitch; }

// The sources of a thread's copies of a grouped tile's rows: rows threadIdx.x / 8 + step·i, 16-byte piece
// threadIdx.x % 8 of each K chunk; the row of x an assignment reads (gate/up, through sorted) or the assignment's own
// row of h (down). Rows past the tile read its last row and are zero-filled (live false).
template <bool GateUp, int Copies>
__device__ __forceinline__ void moe_tile_row_sources(const __nv_bfloat16* x, const int* sorted, int topK,
                                                     const MoeSkinnyTile& tile, int k, int step,
                                                     const __nv_bfloat16* (&src)[Copies], bool (&live)[Copies]) {
#pragma unroll
    for (int i = 0; i < Copies; ++i) {
        const int r = (threadIdx.x >> 3) + step * i;
        const int p = tile.first + min(r, tile.rows - 1);
        src[i] = x + (GateUp ? (long long)(sorted[p] / topK) : (long long)p) * k + 8 * (threadIdx.x & 7);
        live[i] = r < tile.rows;
    }
}

// The sources of a thread's copies of a grouped block's weight rows (rows threadIdx.x / 8 + step·i, piece
// threadIdx.x % 8): block row r is column col0 + place(r).x of the output, its gate row (or the down row) when
// place(r).y is 0, its up row (inter further on) when 1. Columns past the width read row 0 and are zero-filled.
template <int Copies, class Place>
__device__ __forceinline__ void moe_tile_weight_sources(const MoeSkinnyTile& tile, int width, int inter, int k, int step,
                                                        Place place, const __nv_bfloat16* (&src)[Copies],
                                                        bool (&live)[Copies]) {
#pragma unroll
    for (int i = 0; i < Copies; ++i) {
        const int2 at = place((threadIdx.x >> 3) + step * i);
        const int col = tile.col0 + at.x;
        live[i] = col < width;
        src[i] = tile.w + (long long)(live[i] ? (at.y ? inter + col : col) : 0) * k + 8 * (threadIdx.x & 7);
    }
}

// gate/up (GateUp): a block takes 64 intermediate columns col0 .. col0 + 63; warp column wn's 64 weight rows are the
// gate rows of columns col0 + 32·wn .. + 31 then the up rows of the same columns, so a lane holds a column's gate and
// up sums side by side (n-tiles j and j + 4). down: 128 output columns, warp column wn's the 64 from col0 + 64·wn.
template <bool GateUp, int Rows>
__device__ __forceinline__ void moe_grouped_body(const __nv_bfloat16* __restrict__ x,
                                                 const __nv_bfloat16* __restrict__ weightStack, const int* sorted,
                                                 const int* tileStart, const int* tileExpert, const int* tiles,
                                                 int topK, const float* weights, __nv_bfloat16* h, float* y, int hidden,
                                                 int inter) {
    constexpr int rowsPerPass = 2 * Rows / 8, warpRows = Rows / 32;
    constexpr int xCopies = Rows / rowsPerPass, wCopies = kMoeGroupCols / rowsPerPass;
    constexpr int stageBytes = moe_group_stage_bytes(Rows);
    await_previous_kernel();
    const int k = GateUp ? hidden : inter, width = GateUp ? inter : hidden;
    const auto tile = MoeSkinnyTile::of<Rows / 8>(tileStart, tileExpert, tiles, width,
                                                  GateUp ? kMoeGroupCols / 2 : kMoeGroupCols, weightStack,
                                                  (GateUp ? 2LL * inter : hidden) * k);
    if (!tile.live) return;
    unsigned char* smem = dynamic_smem();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp % warpRows, wn = warp / warpRows;
    const int piece = threadIdx.x & 7;
    // the sources of this thread's copies: rows past the tile or the width read a valid row and are zero-filled
    const __nv_bfloat16* xSrc[xCopies];
    bool xLive[xCopies];
    moe_tile_row_sources<GateUp>(x, sorted, topK, tile, k, rowsPerPass, xSrc, xLive);
    const __nv_bfloat16* wSrc[wCopies];
    bool wLive[wCopies];
    moe_tile_weight_sources(tile, width, inter, k, rowsPerPass, [](int r) {
        return GateUp ? make_int2(32 * (r >> 6) + (r & 31), (r & 63) >= 32) : make_int2(r, 0);
    }, wSrc, wLive);
    auto load = [&](int c) {
        unsigned char* stage = smem + (c % kMoeGroupStages) * stageBytes;
#pragma unroll
        for (int i = 0; i < xCopies; ++i) {
            const int r = (threadIdx.x >> 3) + rowsPerPass * i;
            cp_async16(stage + r * kMoeGroupPitch + 16 * piece, xSrc[i] + c * kMoeGroupChunk, xLive[i]);
        }
#pragma unroll
        for (int i = 0; i < wCopies; ++i) {
            const int r = Rows + (threadIdx.x >> 3) + rowsPerPass * i;
            cp_async16(stage + r * kMoeGroupPitch + 16 * piece, wSrc[i] + c * kMoeGroupChunk, wLive[i]);
        }
    };
    float acc[2][8][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
        for (int nj = 0; nj < 8; ++nj) acc[mi][nj][0] = acc[mi][nj][1] = acc[mi][nj][2] = acc[mi][nj][3] = 0.f;
    }
    const int chunks = k / kMoeGroupChunk;
    // every iteration commits one group (empty past the end), so waiting for all but kMoeGroupStages - 2 groups
    // always means the oldest stage has landed
#pragma unroll
    for (int i = 0; i < kMoeGroupStages - 1; ++i) {
        if (i < chunks) load(i);
        cp_async_commit();
    }
    // ldmatrix rows: lane l addresses x row 16·mi + l % 16 at k 8·(l / 16) (the a fragment's four 8 × 8 matrices)
    // and weight row 16·jj + l % 8 + 8·(l / 16) at k 8·(l / 8 % 2) (the b fragments of n-tiles 2·jj and 2·jj + 1)
    const int xRow = 32 * wm + (lane & 15), xCol = 16 * (lane >> 4);
    const int wRow = Rows + 64 * wn + (lane & 7) + ((lane >> 4) << 3), wCol = 16 * ((lane >> 3) & 1);
    for (int c = 0; c < chunks; ++c) {
        cp_async_wait<kMoeGroupStages - 2>();
        __syncthreads();  // chunk c landed for every thread; the stage refilled next was read last iteration
        if (c + kMoeGroupStages - 1 < chunks) load(c + kMoeGroupStages - 1);
        cp_async_commit();
        const uint32_t stage = smem_addr(smem + (c % kMoeGroupStages) * stageBytes);
#pragma unroll
        for (int ks = 0; ks < kMoeGroupChunk / 16; ++ks) {
            uint32_t a[2][4];
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) {
                ldmatrix_x4(a[mi], stage + (xRow + 16 * mi) * kMoeGroupPitch + xCol + 32 * ks);
            }
#pragma unroll
            for (int jj = 0; jj < 4; ++jj) {
                uint32_t b[4];
                ldmatrix_x4(b, stage + (wRow + 16 * jj) * kMoeGroupPitch + wCol + 32 * ks);
#pragma unroll
                for (int mi = 0; mi < 2; ++mi) {
                    mma_bf16(acc[mi][2 * jj], a[mi], b[0], b[1]);
                    mma_bf16(acc[mi][2 * jj + 1], a[mi], b[2], b[3]);
                }
            }
        }
    }
    // accumulator element i of lane (g, t) in tiles (mi, nj) is tile row 32·wm + 16·mi + g + 8·(i / 2) and the warp's
    // weight row 8·nj + 2t + i % 2
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = 32 * wm + 16 * mi + g + 8 * (i >> 1);
            if (m >= tile.rows) continue;
            if (GateUp) {
#pragma unroll
                for (int nj = 0; nj < 4; ++nj) {
                    const int col = tile.col0 + 32 * wn + 8 * nj + 2 * t + (i & 1);
                    if (col >= inter) continue;
                    const float gate = round_to(DT_BF16, acc[mi][nj][i]), up = round_to(DT_BF16, acc[mi][nj + 4][i]);
                    h[(long long)(tile.first + m) * inter + col] = __float2bfloat16_rn(silu_times(gate, up));
                }
            } else {
                const int a = sorted[tile.first + m];
                const float rw = weights[a];
#pragma unroll
                for (int nj = 0; nj < 8; ++nj) {
                    const int col = tile.col0 + 64 * wn + 8 * nj + 2 * t + (i & 1);
                    if (col < hidden) y[(long long)a * hidden + col] = rw * acc[mi][nj][i];
                }
            }
        }
    }
}

// Grid: maxTiles · ceil(inter / 64) blocks (gate/up) or maxTiles · ceil(hidden / 128) (down) of 2 · Rows threads,
// kMoeGroupStages · moe_group_stage_bytes(Rows) bytes of dynamic shared memory; the tiles of moe_sort with
// tileRows = Rows (64, or 128 for the _m128 kernels). h [assignments, inter] in sorted order; y fp32
// [assignments, hidden] at each assignment's place, for moe_combine. The 128-row kernels ask for two blocks an SM,
// which their shared memory allows, so that one block's epilogue and first loads overlap the other's products.
#define MSTAR_MOE_GROUPED_KERNELS(SUFFIX, ROWS, THREADS, MIN_BLOCKS)                                                 \
    static_assert(THREADS == 2 * ROWS, "two threads a tile row");                                                  \
    extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) moe_grouped_gate_up##SUFFIX(                \
        const __nv_bfloat16* x, const __nv_bfloat16* gateUp, const int* sorted, const int* tileStart,             \
        const int* tileExpert, const int* tiles, __nv_bfloat16* h, int topK, int hidden, int inter) {             \
        moe_grouped_body<true, ROWS>(x, gateUp, sorted, tileStart, tileExpert, tiles, topK, nullptr, h, nullptr,  \
                                     hidden, inter);                                                               \
    }                                                                                                              \
    extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) moe_grouped_down##SUFFIX(                   \
        const __nv_bfloat16* h, const __nv_bfloat16* down, const int* sorted, const int* tileStart,               \
        const int* tileExpert, const int* tiles, const float* weights, float* y, int hidden, int inter) {         \
        moe_grouped_body<false, ROWS>(h, down, sorted, tileStart, tileExpert, tiles, 0, weights, nullptr, y,      \
                                      hidden, inter);                                                              \
    }
MSTAR_MOE_GROUPED_KERNELS(, kMoeGroupRows, kMoeGroupThreads, 1)
MSTAR_MOE_GROUPED_KERNELS(_m128, kMoeGroupLargeRows, kMoeGroupLargeThreads, 2)

// The prefill products on Hopper's warpgroup products (wgmma.cuh): the grouped GEMM over moe_sort's tiles of up to
// 128 assignments of an expert, a block of two warpgroups multiplying a tile's rows by 256 weight rows (gate/up: the
// gate rows of 128 intermediate columns, then their up rows; down: 256 output columns). A block stage feeds 4 MFLOP
// with 48 KB (the mma.sync tiles above: 2 MFLOP with 32 KB), so it asks half as much of L2 per product, and the
// products run asynchronously while the warps issue the copies of the stages ahead. Each 64-element chunk of K is a
// stage: the tile's rows (gathered through `sorted`) and the weight rows are copied with cp.async into the 128-byte
// swizzled layout, kMoeWgAhead chunks ahead of the one being multiplied; warpgroup w takes tile rows 64w .. 64w + 63,
// and the second sits out a tile of at most 64 rows (an expert's last, usually), so such a tile costs half the
// products. Launch sizes depend on the row count only, as the tiles' above. bf16 x, weights and h; hidden and inter
// multiples of 64; 16-byte aligned. Epilogues as the grouped GEMM's: gate and up rounded to bf16 before SiLU·mul into
// h; the routing weight times the fp32 sum into y.
//
// A sum visits K in chunks in increasing order, each chunk as four k16 products of the same warpgroup, whatever the
// row's place in its tile: a row gets the same bits from any routing of the other rows and any batch it is part of.
// These bits are not the mma.sync tiles' (the tensor cores sum a k16 product in their own order).
constexpr int kMoeWgRows = 128;
constexpr int kMoeWgCols = 256;
constexpr int kMoeWgThreads = 256;
constexpr int kMoeWgStages = 4;
// Chunks copied ahead of the one multiplied: a stage is refilled two chunks after its products were issued, when the
// wait after the next chunk's issue has seen them finish.
constexpr int kMoeWgAhead = kMoeWgStages - 2;
constexpr int kMoeWgStageBytes = (kMoeWgRows + kMoeWgCols) * 128;
// the stages, and room to start them on 1024 bytes
constexpr int kMoeWgSmemBytes = kMoeWgStages * kMoeWgStageBytes + 1024;

template <bool GateUp>
__device__ __forceinline__ void moe_wgmma_body(const __nv_bfloat16* __restrict__ x,
                                               const __nv_bfloat16* __restrict__ weightStack, const int* sorted,
                                               const int* tileStart, const int* tileExpert, const int* tiles, int topK,
                                               const float* weights, __nv_bfloat16* h, float* y, int hidden,
                                               int inter) {
    constexpr int passRows = kMoeWgThreads / 8, xCopies = kMoeWgRows / passRows, wCopies = kMoeWgCols / passRows;
    static_assert(kMoeWgSmemBytes <= 227 * 1024, "the launch's shared memory fits an SM");
    await_previous_kernel();
    const int k = GateUp ? hidden : inter, width = GateUp ? inter : hidden;
    const auto tile = MoeSkinnyTile::of<kMoeWgRows / 8>(tileStart, tileExpert, tiles, width,
                                                        GateUp ? kMoeWgCols / 2 : kMoeWgCols, weightStack,
                                                        (GateUp ? 2LL * inter : hidden) * k);
    if (!tile.live) return;
    unsigned char* raw = dynamic_smem();
    unsigned char* smem = wgmma_tiles(raw);
    const uint32_t base = smem_addr(smem);
    // thread t copies piece t % 8 of rows t / 8 + 32i: rows of one residue mod 8, so one swizzled offset plus 4 KB a copy
    const int piece = threadIdx.x & 7, row0 = threadIdx.x >> 3;
    const uint32_t dst = wgmma_swizzled(row0, piece);
    const __nv_bfloat16* xSrc[xCopies];
    bool xLive[xCopies];
    moe_tile_row_sources<GateUp>(x, sorted, topK, tile, k, passRows, xSrc, xLive);
    const __nv_bfloat16* wSrc[wCopies];
    bool wLive[wCopies];
    moe_tile_weight_sources(tile, width, inter, k, passRows, [](int r) {
        return GateUp ? make_int2(r % (kMoeWgCols / 2), r >= kMoeWgCols / 2) : make_int2(r, 0);
    }, wSrc, wLive);
    auto load = [&](int c) {
        unsigned char* stage = smem + (c % kMoeWgStages) * kMoeWgStageBytes;
#pragma unroll
        for (int i = 0; i < xCopies; ++i) {
            cp_async16(stage + dst + passRows * 128 * i, xSrc[i] + c * 64, xLive[i]);
        }
#pragma unroll
        for (int i = 0; i < wCopies; ++i) {
            cp_async16(stage + kMoeWgRows * 128 + dst + passRows * 128 * i, wSrc[i] + c * 64, wLive[i]);
        }
    };
    // uniform over the warpgroup, as its products must be; a value broadcast from lane 0 lets the compiler see that
    // each warp takes one side, so it keeps the products asynchronous
    const int wg = threadIdx.x >> 7;
    const bool active = __shfl_sync(0xffffffffu, 64 * wg < tile.rows, 0);
    const int chunks = k / 64;
    // every iteration commits one group of copies (empty past the end), so all but the newest kMoeWgAhead - 1
    // groups landed means chunk c has
#pragma unroll
    for (int i = 0; i < kMoeWgAhead; ++i) {
        if (i < chunks) load(i);
        cp_async_commit();
    }
    float d[128];
    // the loop of one side of the warpgroups, with its products or without: a branch around the products inside the
    // loop would make the compiler wait for each product before going on
    auto mainLoop = [&](auto withProducts) {
        for (int c = 0; c < chunks; ++c) {
            cp_async_wait<kMoeWgAhead - 1>();
            fence_async_shared();
            __syncthreads();  // chunk c landed for every thread; every product of chunk c - 2 has finished
            if constexpr (decltype(withProducts)::value) {
                const uint32_t stage = base + (c % kMoeWgStages) * kMoeWgStageBytes;
                const uint64_t a = wgmma_desc(stage + 64 * 128 * wg), b = wgmma_desc(stage + kMoeWgRows * 128);
                wgmma_fence();
#pragma unroll
                for (int ks = 0; ks < 4; ++ks) wgmma_m64n256k16_bf16(d, a + 2 * ks, b + 2 * ks, c > 0 || ks > 0);
                wgmma_commit();
            }
            if (c + kMoeWgAhead < chunks) load(c + kMoeWgAhead);
            cp_async_commit();
            if constexpr (decltype(withProducts)::value) wgmma_wait<1>();
        }
    };
    if (active) {
        mainLoop(std::true_type{});
        wgmma_wait<0>();
        wgmma_hold(d);
    } else {
        mainLoop(std::false_type{});
    }
    // The epilogue goes through shared memory: each thread puts its results in their tile row, then a thread per row
    // hands the row to the copy engine, so the block's global writes (down: 1 KB of fp32 a row, 128 KB a block) go on
    // while the next block on this SM runs its products, where stores from registers held the block until they left.
    constexpr int rowBytes = GateUp ? kMoeWgCols / 2 * 2 : kMoeWgCols * 4;
    constexpr int pitch = rowBytes + 16;  // consecutive rows start in different banks
    static_assert(kMoeWgRows * pitch <= kMoeWgStages * kMoeWgStageBytes, "the tile fits in the stages");
    __syncthreads();  // every product of the block has read its stage
    if (active) {
        const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
        const int mBase = 64 * wg + 16 * ((threadIdx.x >> 5) & 3) + g;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int m = mBase + 8 * half;
            unsigned char* row = smem + m * pitch;
            if (GateUp) {
#pragma unroll
                for (int j = 0; j < kMoeWgCols / 16; ++j) {
                    float v[2];
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const float gate = round_to(DT_BF16, d[4 * j + 2 * half + e]);
                        const float up = round_to(DT_BF16, d[4 * (j + kMoeWgCols / 16) + 2 * half + e]);
                        v[e] = silu_times(gate, up);
                    }
                    *reinterpret_cast<__nv_bfloat162*>(row + 2 * (8 * j + 2 * q)) = __floats2bfloat162_rn(v[0], v[1]);
                }
            } else {
                const float rw = m < tile.rows ? weights[sorted[tile.first + m]] : 0.f;
#pragma unroll
                for (int j = 0; j < kMoeWgCols / 8; ++j) {
                    *reinterpret_cast<float2*>(row + 4 * (8 * j + 2 * q)) =
                        make_float2(rw * d[4 * j + 2 * half], rw * d[4 * j + 2 * half + 1]);
                }
            }
        }
    }
    fence_async_shared();
    __syncthreads();
    const int m = threadIdx.x;
    if (m < tile.rows) {
        // widths are multiples of 64, so a row's part inside them is too (whole 16-byte pieces)
        const int cols = min(GateUp ? kMoeWgCols / 2 : kMoeWgCols, width - tile.col0);
        void* dst = GateUp ? static_cast<void*>(h + (long long)(tile.first + m) * inter + tile.col0)
                           : static_cast<void*>(y + (long long)sorted[tile.first + m] * hidden + tile.col0);
        bulk_store(dst, base + m * pitch, cols * (GateUp ? 2 : 4));
        bulk_commit();
        bulk_wait_read();
    }
}

// Grid: maxTiles · ceil(inter / 128) blocks (gate/up) or maxTiles · ceil(hidden / 256) (down) of kMoeWgThreads
// threads, kMoeWgSmemBytes of dynamic shared memory; moe_sort's tiles with tileRows = kMoeWgRows. h and y as the
// grouped GEMM's.
extern "C" __global__ void __launch_bounds__(kMoeWgThreads, 1)
    moe_wgmma_gate_up(const __nv_bfloat16* x, const __nv_bfloat16* gateUp, const int* sorted, const int* tileStart,
                      const int* tileExpert, const int* tiles, __nv_bfloat16* h, int topK, int hidden, int inter) {
    moe_wgmma_body<true>(x, gateUp, sorted, tileStart, tileExpert, tiles, topK, nullptr, h, nullptr, hidden, inter);
}
extern "C" __global__ void __launch_bounds__(kMoeWgThreads, 1)
    moe_wgmma_down(const __nv_bfloat16* h, const __nv_bfloat16* down, const int* sorted, const int* tileStart,
                   const int* tileExpert, const int* tiles, const float* weights, float* y, int hidden, int inter) {
    moe_wgmma_body<false>(h, down, sorted, tileStart, tileExpert, tiles, 0, weights, nullptr, y, hidden, inter);
}

// The cuBLAS way's gather: the p < tiles[1] sorted assignments' rows of x into xs, and pos[a], the row of xs that
// assignment a went to, for moe_combine_sorted. With slotRows = 0 the rows stay in sorted order (xs row p: each
// expert's run from expertStart[e] on); with slotRows > 0 expert e's run starts at row e·slotRows (equal slots, for one
// strided batched GEMM over all experts; the rows past a run are left as they were). Copied in 16-byte pieces where
// a row of x is made of them (moe_gather_piece), element by element otherwise; launched over
// assignments · hidden / moe_gather_piece(xDt, hidden) items.
__host__ __device__ constexpr int moe_gather_piece(int xDt, int hidden) {
    return (xDt == DT_BF16 || xDt == DT_F16) && hidden % 8 == 0 ? 8 : xDt == DT_F32 && hidden % 4 == 0 ? 4 : 1;
}

extern "C" __global__ void moe_gather(const void* x, int xDt, const int* ids, const int* sorted,
                                      const int* expertStart, const int* tiles, void* xs, int* pos,
                                      long long assignments, int hidden, int topK, int slotRows) {
    await_previous_kernel();
    const long long count = tiles[1];
    const int piece = moe_gather_piece(xDt, hidden);
    const long long pieces = hidden / piece;
    MSTAR_GRID_LOOP(i, assignments * pieces) {
        const long long p = i / pieces;
        if (p >= count) continue;
        const int o = (int)(i - p * pieces) * piece;
        const int a = sorted[p];
        const int e = ids[a];
        const long long row = slotRows > 0 ? (long long)e * slotRows + (p - expertStart[e]) : p;
        if (o == 0) pos[a] = (int)row;
        const long long from = (long long)(a / topK) * hidden + o, to = row * hidden + o;
        if (piece > 1) {
            const int bytes = piece == 8 ? 2 : 4;
            *reinterpret_cast<uint4*>(static_cast<unsigned char*>(xs) + to * bytes) =
                *reinterpret_cast<const uint4*>(static_cast<const unsigned char*>(x) + from * bytes);
        } else {
            store_f(xs, xDt, to, load_f(x, xDt, from));
        }
    }
}

// out[row, o] = Σ_j weights[row·k + j] · ys[pos[row·k + j], o] in choice order, rounded once to out's dtype: the
// products and sums of moe_down's epilogue and moe_combine, over the down GEMMs' fp32 rows where moe_gather put each
// assignment. An id of -1 (an expert on another device) adds nothing; NaN for a row with another id outside
// [0, experts).
extern "C" __global__ void moe_combine_sorted(const float* ys, const int* pos, const int* ids, const float* weights,
                                              int experts, void* out, int outDt, long long rows, int hidden,
                                              int topK) {
    await_previous_kernel();
    MSTAR_GRID_LOOP(item, rows * hidden / moe_combine_run(hidden)) {
        moe_combine_item(item, hidden, topK, ids, experts, out, outDt, [&](long long a, int o, auto& v) {
            moe_combine_load(ys, (long long)pos[a] * hidden, o, weights[a], v);
        });
    }
}
