// Multi-head latent attention (DeepSeek-V2's MLA; LatentAttentionOps) over a latent pool [layers, pages, 1, pageSize,
// 1, width]: width = R + Dr values per token and layer, the latent normalised by kv_a_layernorm (R = kv_lora_rank)
// then the RoPE'd key part every head shares (Dr = qk_rope_head_dim). kv_b_proj [H, Dn + Dv, R] holds per head the key
// up-projection (rows [0, Dn)) and the value up-projection (rows [Dn, Dn + Dv)): the first is absorbed into the query
// (latent_query), the second applied to the attention's latent output (latent_values), so attention runs in the
// latent space over the pool's rows as keys and their first R values as values. Correctness first: one block per
// token (append) or per (token, head) (the others); the heads of a token do not share their reads of the pool yet.
#include "common.cuh"
#include "rotary.cuh"

using namespace mstar;

constexpr int kLatentThreads = 128;
constexpr int kLatentWarps = kLatentThreads / 32;
// Longest latent row (R + Dr) the kernels hold in a block (CudaLatentAttention.MAX_WIDTH); DeepSeek's is 576.
constexpr int kMaxLatentWidth = 1024;
constexpr int kLatentPerLane = kMaxLatentWidth / 32;
// Longest query nope part latent_query stages in shared memory.
constexpr int kMaxNopeDim = 256;

// Element offset of the row of token slot `slot` of page `page` of `layer`.
__device__ __forceinline__ long long latent_row(int layer, int numPages, int page, int pageSize, int slot, int width) {
    return (((long long)layer * numPages + page) * pageSize + slot) * width;
}

// Rotates the ropeDim values at src[srcBase ...] at position pos into dst[dstBase ...]: NeoX pairs (i, i + Dr/2) or
// interleaved pairs (2i, 2i + 1), invFreq as rope_inplace takes it.
__device__ __forceinline__ void rope_span(const void* src, int srcDt, long long srcBase, void* dst, int dstDt,
                                          long long dstBase, int ropeDim, int interleave, float pos,
                                          const float* invFreq) {
    const int half = ropeDim / 2;
    for (int p = threadIdx.x; p < half; p += blockDim.x) {
        const int a = interleave ? 2 * p : p, b = interleave ? 2 * p + 1 : p + half;
        float s, c;
        sincosf(pos * invFreq[p], &s, &c);
        const float x1 = load_f(src, srcDt, srcBase + a), x2 = load_f(src, srcDt, srcBase + b);
        store_f(dst, dstDt, dstBase + a, rope_rotate(x1, x2, c, s, true));
        store_f(dst, dstDt, dstBase + b, rope_rotate(x1, x2, c, s, false));
    }
}

// One block per token i: its row of kvA [n, R + Dr] into pool[layer, pageIdx[i], 0, offsets[i]], the first R values
// RMS-normalised (as rms_norm does) and weighted by norm, the last Dr rotated at posIds[i].
extern "C" __global__ void __launch_bounds__(kLatentThreads) latent_append(
        const void* kvA, int kvDt, const void* norm, int normDt, float eps, const int* posIds, const float* invFreq,
        void* pool, int poolDt, const int* pageIdx, const int* offsets, int layer, int numPages, int pageSize, int rank,
        int ropeDim, int interleave) {
    await_previous_kernel();
    __shared__ float scratch[32];
    __shared__ float invShared;
    const long long i = blockIdx.x;
    const int width = rank + ropeDim;
    const long long in = i * width;
    float ss = 0.f;
    for (int c = threadIdx.x; c < rank; c += blockDim.x) {
        const float v = load_f(kvA, kvDt, in + c);
        ss += v * v;
    }
    ss = block_sum(ss, scratch);
    if (threadIdx.x == 0) invShared = (float)(1.0 / sqrt((double)(ss / (float)rank + eps)));
    __syncthreads();
    const float inv = invShared;
    const long long out = latent_row(layer, numPages, pageIdx[i], pageSize, offsets[i], width);
    for (int c = threadIdx.x; c < rank; c += blockDim.x) {
        store_f(pool, poolDt, out + c, load_f(kvA, kvDt, in + c) * inv * load_f(norm, normDt, c));
    }
    rope_span(kvA, kvDt, in + rank, pool, poolDt, out + rank, ropeDim, interleave, (float)posIds[i], invFreq);
}

// One block per (token, head) = blockIdx.x: out [n, H, R + Dr] gets q[:Dn] · W_UK[h] (thread c sums column c over
// the nope dims, W_UK's rows read coalesced), then q's rope part rotated at the token's position.
extern "C" __global__ void __launch_bounds__(kLatentThreads) latent_query(
        const void* q, int qDt, const void* kvB, int wDt, const int* posIds, const float* invFreq, void* out,
        int outDt, int heads, int nopeDim, int ropeDim, int rank, int kvBRows, int interleave) {
    await_previous_kernel();
    __shared__ float nope[kMaxNopeDim];
    const long long row = blockIdx.x;
    const int h = (int)(row % heads);
    const long long in = row * (nopeDim + ropeDim);
    const long long o = row * (rank + ropeDim);
    for (int d = threadIdx.x; d < nopeDim; d += blockDim.x) nope[d] = load_f(q, qDt, in + d);
    __syncthreads();
    const long long w = (long long)h * kvBRows * rank;
    for (int c = threadIdx.x; c < rank; c += blockDim.x) {
        float acc = 0.f;
        for (int d = 0; d < nopeDim; d++) acc += nope[d] * load_f(kvB, wDt, w + (long long)d * rank + c);
        store_f(out, outDt, o + c, acc);
    }
    rope_span(q, qDt, in + nopeDim, out, outDt, o + rank, ropeDim, interleave, (float)posIds[row / heads], invFreq);
}

// One block per (query row, head) = blockIdx.x over the plan's rows (PagedAttentionPlan's masks). Warp w takes keys
// w, w + 4, ...: lanes hold 32-strided values of the key's row, the score is a warp sum, and each warp keeps an online
// softmax (max, sum, weighted latent) that the block merges at the end. out [totalQo, H, R]; zeros without keys.
extern "C" __global__ void __launch_bounds__(kLatentThreads) latent_attention(
        const void* q, int qDt, const void* pool, int poolDt, const int* qoIndptr, const int* kvIndptr,
        const int* kvIndices, const int* lastPageLen, void* out, int outDt, int rows, int heads, int rank, int width,
        int pageSize, int numPages, int layer, float smScale, int causal, int windowLeft, int contextOnly) {
    await_previous_kernel();
    __shared__ float qs[kMaxLatentWidth];
    __shared__ float warpMax[kLatentWarps], warpSum[kLatentWarps];
    __shared__ float warpAcc[kLatentWarps][kMaxLatentWidth];
    const int row = (int)(blockIdx.x / heads);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // the sequence holding the row: the last r with qoIndptr[r] <= row (empty sequences before it share its start)
    int lo = 0, hi = rows - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (qoIndptr[mid] <= row) lo = mid; else hi = mid - 1;
    }
    const int r = lo;
    const int qLen = qoIndptr[r + 1] - qoIndptr[r];
    const int pages = kvIndptr[r + 1] - kvIndptr[r];
    const int kvLen = pages == 0 ? 0 : (pages - 1) * pageSize + lastPageLen[r];
    const int pos = kvLen - qLen + (row - qoIndptr[r]);
    const int from = windowLeft >= 0 && pos - windowLeft > 0 ? pos - windowLeft : 0;
    int to = causal && pos + 1 < kvLen ? pos + 1 : kvLen;
    if (contextOnly && kvLen - qLen < to) to = kvLen - qLen;
    for (int c = threadIdx.x; c < width; c += blockDim.x) qs[c] = load_f(q, qDt, (long long)blockIdx.x * width + c);
    __syncthreads();
    float m = -INFINITY, l = 0.f, acc[kLatentPerLane], vals[kLatentPerLane];
    for (int k = 0; k < kLatentPerLane; k++) acc[k] = 0.f;
    for (int j = from + warp; j < to; j += kLatentWarps) {
        const int page = kvIndices[kvIndptr[r] + j / pageSize];
        const long long base = latent_row(layer, numPages, page, pageSize, j % pageSize, width);
        float dot = 0.f;
        for (int k = 0; k < kLatentPerLane; k++) {
            const int c = lane + 32 * k;
            vals[k] = c < width ? load_f(pool, poolDt, base + c) : 0.f;
            dot += c < width ? qs[c] * vals[k] : 0.f;
        }
        const float s = warp_sum(dot) * smScale;
        const float mNew = fmaxf(m, s);
        const float scale = expf(m - mNew), p = expf(s - mNew);
        l = l * scale + p;
        for (int k = 0; k < kLatentPerLane; k++) acc[k] = acc[k] * scale + p * vals[k];
        m = mNew;
    }
    if (lane == 0) {
        warpMax[warp] = m;
        warpSum[warp] = l;
    }
    for (int k = 0; k < kLatentPerLane; k++) {
        const int c = lane + 32 * k;
        if (c < rank) warpAcc[warp][c] = acc[k];
    }
    __syncthreads();
    float total = -INFINITY;
    for (int w = 0; w < kLatentWarps; w++) total = fmaxf(total, warpMax[w]);
    float sum = 0.f;
    for (int w = 0; w < kLatentWarps; w++) sum += warpSum[w] > 0.f ? warpSum[w] * expf(warpMax[w] - total) : 0.f;
    for (int c = threadIdx.x; c < rank; c += blockDim.x) {
        float v = 0.f;
        for (int w = 0; w < kLatentWarps; w++) v += warpSum[w] > 0.f ? warpAcc[w][c] * expf(warpMax[w] - total) : 0.f;
        store_f(out, outDt, (long long)blockIdx.x * rank + c, sum > 0.f ? v / sum : 0.f);
    }
}

// One block per (token, head) = blockIdx.x: out [n, H, Dv] = latent [n, H, R] times W_UV[h]ᵀ, warp w summing
// outputs w, w + 4, ... over R (lanes striding the weight row, then a warp sum).
extern "C" __global__ void __launch_bounds__(kLatentThreads) latent_values(
        const void* latent, int xDt, const void* kvB, int wDt, void* out, int outDt, int heads, int rank, int dv,
        int nopeDim, int kvBRows) {
    await_previous_kernel();
    __shared__ float xs[kMaxLatentWidth];
    const long long row = blockIdx.x;
    const int h = (int)(row % heads);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int c = threadIdx.x; c < rank; c += blockDim.x) xs[c] = load_f(latent, xDt, row * rank + c);
    __syncthreads();
    for (int v = warp; v < dv; v += kLatentWarps) {
        const long long w = ((long long)h * kvBRows + nopeDim + v) * rank;
        float acc = 0.f;
        for (int c = lane; c < rank; c += 32) acc += xs[c] * load_f(kvB, wDt, w + c);
        acc = warp_sum(acc);
        if (lane == 0) store_f(out, outDt, row * dv + v, acc);
    }
}
