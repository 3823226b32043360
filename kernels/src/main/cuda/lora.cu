// Batched LoRA (ProjectionOps.addLora and addLoraGroup): each row of a projection's output gains its own adapter's
// low-rank update, out[i, col_g + j] += scales[s] · Σ_r t[i, g, r] · b_g[s, j, r] with t[i, g, r] = Σ_c x[i, c] ·
// a_g[s, r, c] and s = slots[i] (a negative slot: no update), for up to three modules g that read the same x (q, k and
// v; gate and up) in one launch each. lora_shrink writes t (fp32 [rows, groups · rank]), lora_expand adds it into out.
// The slot of each row is read from device memory, never from launch arguments, so a recorded decode graph serves
// whatever adapters the rows of a later step use.
//
// Rows are grouped by slot within windows of kLoraWindow rows: the block of a window's first row of a slot serves
// every row of that slot in the window, so an adapter's A and B are read once per window however many rows use it
// (a decode batch of 64 rows over 8 adapters reads 8 adapters, not 64), and the blocks of later rows of that slot
// return at once. Windows keep the scans short and the work spread over blocks when prefill chunks bring thousands of
// rows. The rank is the stack's (adapters of a lower rank are zero-padded) and has no bound of the kernels' own.
#include "common.cuh"

using namespace mstar;

constexpr int kLoraThreads = 256;
constexpr int kLoraWarps = kLoraThreads / 32;
constexpr int kLoraWindow = 64;
// Rows whose dot products a shrink warp runs together, each A vector read once for all of them.
constexpr int kLoraShrinkRows = 8;
// Interleaved slices of K whose sums a shrink adds in order (one per warp of a block).
constexpr int kLoraSlices = kLoraWarps;
// Output columns per expand thread, kLoraThreads apart.
constexpr int kLoraExpandColumns = 4;
// Ranks an expand thread keeps in registers; larger ranks read B per row (from L1).
constexpr int kLoraRegisterRank = 32;
// Rows an expand thread updates together.
constexpr int kLoraExpandBatch = 4;

// The rows of the window of row i whose slot is slots[i], in order, into rows[] (shared); their count, or 0 when an
// earlier row of the window has that slot (its block serves them) or the slot is negative. Every thread of the block
// calls it and gets the same answer; needs blockDim.x >= kLoraWindow.
__device__ __forceinline__ int lora_window_rows(const int* slots, long long rowCount, long long i, int* rows) {
    const int s = slots[i];
    if (s < 0) {
        return 0;
    }
    const long long window = i / kLoraWindow * kLoraWindow;
    const long long end = window + kLoraWindow < rowCount ? window + kLoraWindow : rowCount;
    const long long earlier = window + threadIdx.x;
    if (__syncthreads_or(earlier < i && slots[earlier] == s)) {
        return 0;
    }
    __shared__ int count;
    if (threadIdx.x < 32) {
        int n = 0;
        const unsigned lane = threadIdx.x;
        for (long long base = i; base < end; base += 32) {
            const long long j = base + lane;
            const unsigned mask = __ballot_sync(0xffffffffu, j < end && slots[j] == s);
            if (j < end && ((mask >> lane) & 1u)) {
                rows[n + __popc(mask & ((1u << lane) - 1u))] = (int)j;
            }
            n += __popc(mask);
        }
        if (lane == 0) {
            count = n;
        }
    }
    __syncthreads();
    return count;
}

// Eight bf16 of a and of b (16 bytes each) multiplied and summed in fp32; a bf16 is the top half of an fp32's bits.
__device__ __forceinline__ float dot8_bf16(const uint4& a, const uint4& b) {
    const unsigned aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
    float acc = 0.f;
#pragma unroll
    for (int w = 0; w < 4; w++) {
        acc += __uint_as_float(aw[w] << 16) * __uint_as_float(bw[w] << 16);
        acc += __uint_as_float(aw[w] & 0xffff0000u) * __uint_as_float(bw[w] & 0xffff0000u);
    }
    return acc;
}

// t[row, g · rank + r] = Σ_c x[row, c] · a_g[s, r, c] for every row of the window served by this block. One 1-D grid
// over (row, group, chunk of ranksPerBlock ranks). K is cut into kLoraSlices interleaved slices (16-byte vector v of a
// row belongs to slice (v / 32) % kLoraSlices); a slice's sum is a warp's, and the slices add up in slice order. The
// block's 8 warps share its ranks' slices (ranksPerBlock 1: eight warps on each rank's slices at once; 8: each warp all
// slices of one rank, in turn), so the sum of every row is the same whichever ranksPerBlock the launch chose: a decode
// batch of few rows per adapter takes 1 (the whole GPU on a few dot products of K), prefill takes 8 (fewer blocks). Up
// to kLoraShrinkRows rows of the slot go through one pass, each A vector read once for all of them.
extern "C" __global__ void __launch_bounds__(kLoraThreads) lora_shrink(const void* x, int xDt, const void* a0,
                                                                     const void* a1, const void* a2, int aDt,
                                                                     int groups, const int* slots, float* t,
                                                                     long long rowCount, int stack, int rank, int k,
                                                                     int ranksPerBlock) {
    await_previous_kernel();
    const int rankChunks = (rank + ranksPerBlock - 1) / ranksPerBlock;
    const long long i = blockIdx.x / ((long long)groups * rankChunks);
    const int g = (int)(blockIdx.x / rankChunks % groups);
    const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
    const int warpsPerRank = kLoraWarps / ranksPerBlock;
    const int local = warp / warpsPerRank;  // this warp's rank within the block
    const int r = (int)(blockIdx.x % rankChunks) * ranksPerBlock + local;
    __shared__ int rows[kLoraWindow];
    __shared__ float partial[kLoraWarps][kLoraSlices][kLoraShrinkRows];
    const int n = lora_window_rows(slots, rowCount, i, rows);
    const int s = slots[i];
    if (n == 0 || s >= stack) {
        return;
    }
    const bool live = r < rank;
    const void* a = g == 0 ? a0 : g == 1 ? a1 : a2;
    const long long aBase = ((long long)s * rank + (live ? r : 0)) * k;
    const bool vectors = xDt == DT_BF16 && aDt == DT_BF16 && (k & 7) == 0
                         && (((uintptr_t)x | (uintptr_t)a) & 15) == 0;
    // one element (or 16-byte vector) per lane and step: units of 8 elements with vectors, of 1 without
    const int units = vectors ? k / 8 : k;
    for (int first = 0; first < n; first += kLoraShrinkRows) {
        const int m = n - first < kLoraShrinkRows ? n - first : kLoraShrinkRows;
        for (int slice = warp % warpsPerRank; live && slice < kLoraSlices; slice += warpsPerRank) {
            float acc[kLoraShrinkRows] = {};
            for (int u = slice * 32 + lane; u < units; u += kLoraSlices * 32) {
                if (vectors) {
                    const uint4 av8 = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(a) + aBase)[u];
#pragma unroll
                    for (int q = 0; q < kLoraShrinkRows; q++) {
                        if (q < m) {
                            const uint4* xv = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(x)
                                                                             + (long long)rows[first + q] * k);
                            acc[q] += dot8_bf16(xv[u], av8);
                        }
                    }
                } else {
                    const float av = load_f(a, aDt, aBase + u);
#pragma unroll
                    for (int q = 0; q < kLoraShrinkRows; q++) {
                        if (q < m) {
                            acc[q] += load_f(x, xDt, (long long)rows[first + q] * k + u) * av;
                        }
                    }
                }
            }
#pragma unroll
            for (int q = 0; q < kLoraShrinkRows; q++) {
                const float sum = warp_sum(acc[q]);
                if (lane == 0) {
                    partial[local][slice][q] = sum;
                }
            }
        }
        __syncthreads();
        // one thread per (rank of the block, row of the pass) adds the slices in order
        const int e = (int)threadIdx.x;
        if (e < ranksPerBlock * kLoraShrinkRows) {
            const int rb = e / kLoraShrinkRows, q = e % kLoraShrinkRows;
            const int rr = (int)(blockIdx.x % rankChunks) * ranksPerBlock + rb;
            if (q < m && rr < rank) {
                float sum = 0.f;
#pragma unroll
                for (int sl = 0; sl < kLoraSlices; sl++) {
                    sum += partial[rb][sl][q];
                }
                t[((long long)rows[first + q] * groups + g) * rank + rr] = sum;
            }
        }
        __syncthreads();
    }
}

// out[row, col_g + j] += scales[s] · Σ_r t[row, g, r] · b_g[s, j, r] for every row of the window served by this block.
// One 1-D grid over (row, chunk of kLoraThreads · kLoraExpandColumns columns of the groups' n0 + n1 + n2): each thread
// takes kLoraExpandColumns columns, holds a column's B row in registers (up to kLoraRegisterRank ranks) and runs it
// over the window's rows of the slot, whose t rows the block first copies into shared memory (up to that rank), the
// rows kLoraExpandBatch at a time so their loads of out overlap. Rows whose slot lies outside the stack get NaN in
// every target column, so a bad slot shows downstream instead of reading another adapter.
extern "C" __global__ void __launch_bounds__(kLoraThreads) lora_expand(
        const float* t, const void* b0, const void* b1, const void* b2, int bDt, int n0, int n1, int n2, int col0,
        int col1, int col2, int groups, const float* scales, const int* slots, void* out, int outDt, long long rowCount,
        int rank, int width, int stack) {
    await_previous_kernel();
    const int total = n0 + (groups > 1 ? n1 : 0) + (groups > 2 ? n2 : 0);
    const int perBlock = kLoraThreads * kLoraExpandColumns;
    const int chunks = (total + perBlock - 1) / perBlock;
    const long long i = blockIdx.x / chunks;
    const int chunk = (int)(blockIdx.x % chunks);
    __shared__ int rows[kLoraWindow];
    const int n = lora_window_rows(slots, rowCount, i, rows);
    if (n == 0) {
        return;
    }
    const int s = slots[i];
    __shared__ float ts[kLoraWindow * 3 * kLoraRegisterRank];
    const int tWidth = groups * rank;
    if (rank <= kLoraRegisterRank) {
        for (int e = (int)threadIdx.x; e < n * tWidth; e += kLoraThreads) {
            ts[e] = t[(long long)rows[e / tWidth] * tWidth + e % tWidth];
        }
        __syncthreads();
    }
    const bool vectors = bDt == DT_BF16 && (rank & 7) == 0 && rank <= kLoraRegisterRank
                         && (((uintptr_t)b0 | (uintptr_t)(groups > 1 ? b1 : b0) | (uintptr_t)(groups > 2 ? b2 : b0))
                             & 15) == 0;
    for (int q = 0; q < kLoraExpandColumns; q++) {
        const int c = chunk * perBlock + q * kLoraThreads + (int)threadIdx.x;
        if (c >= total) {
            break;
        }
        const int g = c < n0 ? 0 : c < n0 + n1 ? 1 : 2;
        const int j = c - (g == 0 ? 0 : g == 1 ? n0 : n0 + n1);
        const int n_g = g == 0 ? n0 : g == 1 ? n1 : n2;
        const int col = (g == 0 ? col0 : g == 1 ? col1 : col2) + j;
        if (s >= stack) {
            for (int e = 0; e < n; e++) {
                store_f(out, outDt, (long long)rows[e] * width + col, NAN);
            }
            continue;
        }
        const void* b = g == 0 ? b0 : g == 1 ? b1 : b2;
        const long long bBase = ((long long)s * n_g + j) * rank;
        const float scale = scales[s];
        if (rank <= kLoraRegisterRank) {
            float br[kLoraRegisterRank];
            if (vectors) {
                const uint4* bv = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(b) + bBase);
#pragma unroll
                for (int v = 0; v < kLoraRegisterRank / 8; v++) {
                    if (v * 8 < rank) {
                        const uint4 w = bv[v];
                        const unsigned ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
                        for (int h = 0; h < 4; h++) {
                            br[v * 8 + 2 * h] = __uint_as_float(ws[h] << 16);
                            br[v * 8 + 2 * h + 1] = __uint_as_float(ws[h] & 0xffff0000u);
                        }
                    }
                }
            } else {
#pragma unroll
                for (int r = 0; r < kLoraRegisterRank; r++) {
                    br[r] = r < rank ? load_f(b, bDt, bBase + r) : 0.f;
                }
            }
            for (int e0 = 0; e0 < n; e0 += kLoraExpandBatch) {
                float before[kLoraExpandBatch];
#pragma unroll
                for (int u = 0; u < kLoraExpandBatch; u++) {
                    before[u] = e0 + u < n ? load_f(out, outDt, (long long)rows[e0 + u] * width + col) : 0.f;
                }
#pragma unroll
                for (int u = 0; u < kLoraExpandBatch; u++) {
                    if (e0 + u < n) {
                        const float* tr = ts + (e0 + u) * tWidth + g * rank;
                        float acc = 0.f;
#pragma unroll
                        for (int r = 0; r < kLoraRegisterRank; r++) {
                            if (r < rank) {
                                acc += tr[r] * br[r];
                            }
                        }
                        store_f(out, outDt, (long long)rows[e0 + u] * width + col, before[u] + scale * acc);
                    }
                }
            }
        } else {
            for (int e = 0; e < n; e++) {
                const float* tr = t + ((long long)rows[e] * groups + g) * rank;
                float acc = 0.f;
                for (int r = 0; r < rank; r++) {
                    acc += tr[r] * load_f(b, bDt, bBase + r);
                }
                const long long o = (long long)rows[e] * width + col;
                store_f(out, outDt, o, load_f(out, outDt, o) + scale * acc);
            }
        }
    }
}
