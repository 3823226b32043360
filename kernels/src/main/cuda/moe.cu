// Mixture-of-experts layers (MoeOps): the router, then the routed experts' gated MLPs grouped by expert.
//   moe_route      one warp per row: scores (softmax or sigmoid), DeepSeek-V2's group limit, top k, normalise, scale
//   moe_sort       one block: the row-choices ("assignments", a = row·k + j) sorted by expert, and the list of
//                  row tiles (each kMoeTileRows assignments of one expert) the grouped GEMMs run over
//   moe_gate_up    grouped GEMM: a tile of one expert's assignments × a tile of its gate and up rows, SiLU·mul in
//                  the epilogue, into h [assignments, I] in sorted order
//   moe_down       grouped GEMM: h × the expert's down rows, the routing weight applied in the epilogue, into
//                  y [assignments, H] (fp32) at each assignment's own place
//   moe_combine    out[row] = Σ_j y[row·k + j], in the order of the row's choices
// The reduction over a row's k experts is a pass of its own rather than atomics in moe_down's epilogue, so that the
// result does not depend on which tile finishes first (the engine's batch-invariance promise). Every launch size is a
// function of the row count alone (empty tiles exit at once), so a recorded decode graph serves any routing.
// Correctness first: the GEMMs run on the CUDA cores in fp32 from shared-memory tiles; each output element is one
// thread's sum in index order.
#include "common.cuh"
#include "activations.cuh"

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

// One block of kMoeSortThreads. sorted[p] = the assignment at sorted position p, grouped by expert in expert order
// (within an expert in any order: each output row's sums do not depend on its neighbours in a tile). tileStart[t] is
// the sorted position of tile t's first row and tileExpert[t] its expert; tiles[0] is their number and tiles[1] the
// number of sorted assignments. Ids outside [0, experts) are left out (moe_combine makes their rows NaN).
extern "C" __global__ void __launch_bounds__(kMoeSortThreads) moe_sort(const int* ids, int assignments, int experts,
                                                                       int* sorted, int* tileStart, int* tileExpert,
                                                                       int* tiles) {
    await_previous_kernel();
    __shared__ int count[kMoeMaxExperts];
    __shared__ int cursor[kMoeMaxExperts];
    for (int e = threadIdx.x; e < experts; e += blockDim.x) count[e] = 0;
    __syncthreads();
    for (int a = threadIdx.x; a < assignments; a += blockDim.x) {
        const int e = ids[a];
        if (e >= 0 && e < experts) atomicAdd(&count[e], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int start = 0, t = 0;
        for (int e = 0; e < experts; e++) {
            cursor[e] = start;
            for (int r = 0; r < count[e]; r += kMoeTileRows, t++) {
                tileStart[t] = start + r;
                tileExpert[t] = e;
            }
            start += count[e];
        }
        tiles[0] = t;
        tiles[1] = start;
    }
    __syncthreads();
    for (int a = threadIdx.x; a < assignments; a += blockDim.x) {
        const int e = ids[a];
        if (e >= 0 && e < experts) sorted[atomicAdd(&cursor[e], 1)] = a;
    }
}

// Rows of tile `tile`: up to kMoeTileRows, fewer in an expert's last tile (the next tile starts at the next expert).
__device__ __forceinline__ int moe_tile_rows(const int* tileStart, const int* tiles, int tile) {
    const int end = tile + 1 < tiles[0] ? tileStart[tile + 1] : tiles[1];
    return min(kMoeTileRows, end - tileStart[tile]);
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
    const int rows = moe_tile_rows(tileStart, tiles, tile);
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
    const int rows = moe_tile_rows(tileStart, tiles, tile);
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
// downstream instead of reading another expert's rows.
extern "C" __global__ void moe_combine(const float* y, const int* ids, int experts, void* out, int outDt,
                                       long long rows, int hidden, int topK) {
    await_previous_kernel();
    MSTAR_GRID_LOOP(e, rows * hidden) {
        const long long row = e / hidden;
        const int o = (int)(e - row * hidden);
        float acc = 0.f;
        for (int j = 0; j < topK; j++) {
            const int id = ids[row * topK + j];
            acc += id == -1 ? 0.f : id >= 0 && id < experts ? y[(row * topK + j) * hidden + o] : NAN;
        }
        store_f(out, outDt, e, acc);
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
