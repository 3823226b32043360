// Multi-head latent attention (DeepSeek-V2's MLA; LatentAttentionOps) over a latent pool [layers, pages, 1, pageSize,
// 1, width]: width = R + Dr values per token and layer, the latent normalised by kv_a_layernorm (R = kv_lora_rank)
// then the RoPE'd key part every head shares (Dr = qk_rope_head_dim). kv_b_proj [H, Dn + Dv, R] holds per head the key
// up-projection (rows [0, Dn)) and the value up-projection (rows [Dn, Dn + Dv)): the first is absorbed into the query
// (latent_query), the second applied to the attention's latent output (latent_values), so attention runs in the
// latent space over the pool's rows as keys and their first R values as values. One block per token (append) or per
// (token, head) (query, values, and attention of fp32 rows); bf16 rows at DeepSeek's latent (R 512, Dr 64) attend in
// latent_attention_mma instead: 16 heads of a query row share each latent row read, on the tensor cores, split over
// keys with a merge pass. bf16 query absorption and value up-projection of many rows go to cuBLAS (latent_query then
// rotates the rope part alone).
#include "common.cuh"
#include "attention.cuh"
#include "mma.cuh"
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

// The keys query row `row` of a plan sees, [from, to), and the sequence `seq` holding it: the last sequence starting
// at or before the row (empty sequences before it share its start), PagedAttentionPlan's masks at the row's position.
struct LatentRowKeys {
    int seq, from, to;

    __device__ __forceinline__ static LatentRowKeys of(int row, int seqs, const int* qoIndptr, const int* kvIndptr,
                                                       const int* lastPageLen, int pageSize, int causal,
                                                       int windowLeft, int contextOnly) {
        int lo = 0, hi = seqs - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (qoIndptr[mid] <= row) lo = mid; else hi = mid - 1;
        }
        LatentRowKeys k;
        k.seq = lo;
        const int qLen = qoIndptr[lo + 1] - qoIndptr[lo];
        const int pages = kvIndptr[lo + 1] - kvIndptr[lo];
        const int kvLen = pages == 0 ? 0 : (pages - 1) * pageSize + lastPageLen[lo];
        const int pos = kvLen - qLen + (row - qoIndptr[lo]);
        k.from = windowLeft >= 0 && pos - windowLeft > 0 ? pos - windowLeft : 0;
        k.to = causal && pos + 1 < kvLen ? pos + 1 : kvLen;
        if (contextOnly && kvLen - qLen < k.to) k.to = kvLen - qLen;
        return k;
    }
};

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
// the nope dims, W_UK's rows read coalesced; skipped when `absorbed`: a GEMM wrote it), then q's rope part rotated
// at the token's position.
extern "C" __global__ void __launch_bounds__(kLatentThreads) latent_query(
        const void* q, int qDt, const void* kvB, int wDt, const int* posIds, const float* invFreq, void* out,
        int outDt, int heads, int nopeDim, int ropeDim, int rank, int kvBRows, int interleave, int absorbed) {
    await_previous_kernel();
    __shared__ float nope[kMaxNopeDim];
    const long long row = blockIdx.x;
    const int h = (int)(row % heads);
    const long long in = row * (nopeDim + ropeDim);
    const long long o = row * (rank + ropeDim);
    if (!absorbed) {
        for (int d = threadIdx.x; d < nopeDim; d += blockDim.x) nope[d] = load_f(q, qDt, in + d);
        __syncthreads();
        const long long w = (long long)h * kvBRows * rank;
        for (int c = threadIdx.x; c < rank; c += blockDim.x) {
            float acc = 0.f;
            for (int d = 0; d < nopeDim; d++) acc += nope[d] * load_f(kvB, wDt, w + (long long)d * rank + c);
            store_f(out, outDt, o + c, acc);
        }
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
    const LatentRowKeys keys = LatentRowKeys::of(row, rows, qoIndptr, kvIndptr, lastPageLen, pageSize, causal,
                                                 windowLeft, contextOnly);
    const int r = keys.seq, from = keys.from, to = keys.to;
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

// bf16 query rows (decode rows, or every row of a prefill chunk with its causal keys) at R = 512, Dr = 64 on the
// tensor cores. Attention with 16 heads over a 576-value latent row is 17 k FMAs per key read (1152 bytes): more than
// the CUDA cores do at the memory's rate, so the heads are the 16 rows of an mma tile and every latent row is read once
// for them. Block (x: slice, y: 16-head tile, z: query row) walks its slice of the row's keys (LatentRowKeys) in tiles
// of 32 keys staged by cp.async, two stages deep; per tile warp w scores keys 8w..8w+7 against the 16 queries
// (S = Q·Kᵀ over 576), the scores meet in shared memory, every warp runs the same online softmax over the tile, and
// warp w accumulates latent columns 128w..128w+127 of P·V (V = the rows' first 512 values). A row with one slice
// writes out; otherwise each slice writes its normalised partial and log2-sum-exp, and latent_attention_merge
// combines them. The rows of a prefill chunk read their shared keys once each (from L2): a row per block keeps the
// kernel one for decode and prefill.
constexpr int kLdRank = 512;
constexpr int kLdWidth = 576;
constexpr int kLdHeads = 16;
constexpr int kLdWarps = 4;
constexpr int kLdTileKeys = 32;
constexpr int kLdStride = kLdWidth + 8;  // row stride in shared memory: rows 16 bytes off a bank period apart
// Row stride of the scores: the 8 rows a softmax read spans (g = 0..7) land on 2-way-shared banks, not one (stride 32)
constexpr int kLdScoreStride = kLdTileKeys + 8;
// Shortest slice (a multiple of the tile); CudaLatentAttention.DECODE_MIN_SLICE_KEYS must equal it.
constexpr int kLdMinSliceKeys = 64;
// Dynamic shared memory: Q [16][stride], two stages of [32][stride] latent rows (bf16), the tile's scores [16][40]
// fp32. CudaLatentAttention.DECODE_SMEM_BYTES must equal it.
constexpr int kLdSmemBytes = (kLdHeads + 2 * kLdTileKeys) * kLdStride * 2 + kLdHeads * kLdScoreStride * 4;

// The visible keys of a query row (LatentRowKeys) and their slicing.
struct LatentRowSlices {
    int seq, from, to, keys, slices;

    __device__ __forceinline__ static LatentRowSlices of(int row, int seqs, const int* qoIndptr, const int* kvIndptr,
                                                         const int* lastPageLen, int pageSize, int causal,
                                                         int windowLeft, int contextOnly, int splits) {
        const LatentRowKeys k = LatentRowKeys::of(row, seqs, qoIndptr, kvIndptr, lastPageLen, pageSize, causal,
                                                  windowLeft, contextOnly);
        LatentRowSlices d;
        d.seq = k.seq;
        d.from = k.from;
        d.to = k.to;
        const int span = max(0, d.to - d.from);
        const int even = (span + splits - 1) / splits;
        d.keys = (max(kLdMinSliceKeys, even) + kLdTileKeys - 1) / kLdTileKeys * kLdTileKeys;
        d.slices = max(1, (span + d.keys - 1) / d.keys);
        return d;
    }
};

extern "C" __global__ void __launch_bounds__(kLdWarps * 32) latent_attention_mma(
        const __nv_bfloat16* q, const __nv_bfloat16* pool, const int* qoIndptr, const int* kvIndptr,
        const int* kvIndices, const int* lastPageLen, __nv_bfloat16* out, float* partialO, float* partialLse,
        int seqs, int heads, int pageSize, int numPages, int layer, float smScale, int causal, int windowLeft,
        int contextOnly, int splits) {
    using T = __nv_bfloat16;
    await_previous_kernel();
    const int row = blockIdx.z, h0 = blockIdx.y * kLdHeads, split = blockIdx.x;
    const LatentRowSlices d = LatentRowSlices::of(row, seqs, qoIndptr, kvIndptr, lastPageLen, pageSize, causal,
                                                  windowLeft, contextOnly, splits);
    if (split >= d.slices) return;
    const int kBegin = d.from + split * d.keys, kEnd = min(d.to, kBegin + d.keys);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;

    T* qs = reinterpret_cast<T*>(dynamic_smem());
    T* stages = qs + kLdHeads * kLdStride;
    float* ss = reinterpret_cast<float*>(stages + 2 * kLdTileKeys * kLdStride);  // [16][40] scores, log2 units
    constexpr int CHUNKS = kLdWidth * 2 / 16;                                       // 16-byte copies per row
    for (int i = threadIdx.x; i < kLdHeads * CHUNKS; i += blockDim.x) {
        const int h = i / CHUNKS, c = i - h * CHUNKS;
        cp_async16(qs + h * kLdStride + c * 8, q + ((long long)row * heads + h0 + h) * kLdWidth + c * 8, true);
    }
    cp_async_commit();
    const int* pageIds = kvIndices + kvIndptr[d.seq];
    const int tiles = kBegin < kEnd ? (kEnd - kBegin + kLdTileKeys - 1) / kLdTileKeys : 0;
    // A tile's rows in the pool, looked up by warp 0 one tile ahead: a page id read beside each cp.async (whose
    // asm keeps loads from moving past it) cost every thread 18 dependent global reads a tile. Two buffers: warp 0
    // writes tile 1's while the others may still read tile 0's (no barrier between the first two issues).
    __shared__ long long rowAt[2][kLdTileKeys];
    auto pageOf = [&](int tile) {
        const int j = kBegin + tile * kLdTileKeys + lane;
        return j < kEnd ? pageIds[j / pageSize] : 0;
    };
    int nextPage = warp == 0 && tiles > 0 ? pageOf(0) : 0;
    auto issue = [&](int tile) {
        T* stage = stages + (tile & 1) * kLdTileKeys * kLdStride;
        const int k0 = kBegin + tile * kLdTileKeys;
        if (warp == 0) {
            const int j = k0 + lane;
            rowAt[tile & 1][lane] = j < kEnd ? latent_row(layer, numPages, nextPage, pageSize, j % pageSize, kLdWidth)
                                             : -1;
            if (tile + 1 < tiles) nextPage = pageOf(tile + 1);
        }
        __syncthreads();
        for (int i = threadIdx.x; i < kLdTileKeys * CHUNKS; i += blockDim.x) {
            const int key = i / CHUNKS, c = i - key * CHUNKS;
            const long long row = rowAt[tile & 1][key];
            cp_async16(stage + key * kLdStride + c * 8, row >= 0 ? pool + row + c * 8 : pool, row >= 0);
        }
        cp_async_commit();
    };
    if (tiles > 0) issue(0);

    const float scaleLog2 = smScale * kLog2e;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // rows g and g + 8
    float acc[16][4];                                         // columns 128 warp + 8 n + (2t, 2t + 1)
#pragma unroll
    for (int n = 0; n < 16; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    // ldmatrix addresses: A-style (16 rows, 16 columns) and B-style (8 rows, 32 columns) of a lane
    const int aRow = (lane & 7) + ((lane >> 3) & 1) * 8, aCol = (lane >> 4) * 8;
    const int bRow = lane & 7, bCol = (lane >> 3) * 8;

    for (int tile = 0; tile < tiles; ++tile) {
        if (tile + 1 < tiles) issue(tile + 1);
        else cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const T* stage = stages + (tile & 1) * kLdTileKeys * kLdStride;
        const int k0 = kBegin + tile * kLdTileKeys;
        {   // scores of keys 8 warp .. 8 warp + 7, over 576 values in four independent sums: one accumulator
            // would chain 36 mma.sync, each waiting for the last
            float cs[4][4] = {};
#pragma unroll 3
            for (int kk = 0; kk < kLdWidth / 16; kk += 4) {
#pragma unroll
                for (int h = 0; h < 4; h += 2) {
                    uint32_t a0[4], a1[4], b[4];
                    ldmatrix_x4(a0, smem_addr(qs + aRow * kLdStride + (kk + h) * 16 + aCol));
                    ldmatrix_x4(a1, smem_addr(qs + aRow * kLdStride + (kk + h + 1) * 16 + aCol));
                    ldmatrix_x4(b, smem_addr(stage + (warp * 8 + bRow) * kLdStride + (kk + h) * 16 + bCol));
                    mma_bf16(cs[h], a0, b[0], b[1]);
                    mma_bf16(cs[h + 1], a1, b[2], b[3]);
                }
            }
            float c[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) c[e] = (cs[0][e] + cs[1][e]) + (cs[2][e] + cs[3][e]);
            const int key = warp * 8 + 2 * t;
            ss[g * kLdScoreStride + key] = k0 + key < kEnd ? c[0] * scaleLog2 : -INFINITY;
            ss[g * kLdScoreStride + key + 1] = k0 + key + 1 < kEnd ? c[1] * scaleLog2 : -INFINITY;
            ss[(g + 8) * kLdScoreStride + key] = k0 + key < kEnd ? c[2] * scaleLog2 : -INFINITY;
            ss[(g + 8) * kLdScoreStride + key + 1] = k0 + key + 1 < kEnd ? c[3] * scaleLog2 : -INFINITY;
        }
        __syncthreads();
        // P's A fragments for keys 16 kk2 .. + 15: (g, 2t..), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..)
        float s[2][8];
        float tileMax[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int kk2 = 0; kk2 < 2; ++kk2) {
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const int row = g + 8 * ((e >> 1) & 1), key = kk2 * 16 + 2 * t + (e & 1) + 8 * (e >> 2);
                s[kk2][e] = ss[row * kLdScoreStride + key];
                tileMax[(e >> 1) & 1] = fmaxf(tileMax[(e >> 1) & 1], s[kk2][e]);
            }
        }
        float alpha[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            tileMax[i] = fmaxf(tileMax[i], __shfl_xor_sync(0xffffffffu, tileMax[i], 1));
            tileMax[i] = fmaxf(tileMax[i], __shfl_xor_sync(0xffffffffu, tileMax[i], 2));
            const float mNew = fmaxf(m[i], tileMax[i]);  // finite: a tile holds at least one visible key
            alpha[i] = fast_exp2(m[i] - mNew);
            m[i] = mNew;
            l[i] *= alpha[i];
        }
#pragma unroll
        for (int n = 0; n < 16; ++n) {
            acc[n][0] *= alpha[0];
            acc[n][1] *= alpha[0];
            acc[n][2] *= alpha[1];
            acc[n][3] *= alpha[1];
        }
#pragma unroll
        for (int kk2 = 0; kk2 < 2; ++kk2) {
            float p[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const int i = (e >> 1) & 1;
                p[e] = fast_exp2(s[kk2][e] - m[i]);
                l[i] += p[e];
            }
            const uint32_t a[4] = {pack_bf16(p[0], p[1]), pack_bf16(p[2], p[3]), pack_bf16(p[4], p[5]),
                                   pack_bf16(p[6], p[7])};
#pragma unroll
            for (int n = 0; n < 16; n += 2) {
                uint32_t b[4];
                ldmatrix_x4_trans(b, smem_addr(stage + (kk2 * 16 + aRow) * kLdStride + warp * 128 + n * 8 + aCol));
                mma_bf16(acc[n], a, b[0], b[1]);
                mma_bf16(acc[n + 1], a, b[2], b[3]);
            }
        }
        __syncthreads();  // the stage and the scores are free for the next tile
    }
    cp_async_wait<0>();
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }
    const bool whole = d.slices == 1;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int h = h0 + g + 8 * i;
        const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;
        const long long head = (long long)row * heads + h;
#pragma unroll
        for (int n = 0; n < 16; ++n) {
            const int col = warp * 128 + n * 8 + 2 * t;
            const float v0 = acc[n][2 * i] * inv, v1 = acc[n][2 * i + 1] * inv;
            if (whole) {
                const long long at = head * kLdRank + col;
                store_elem<T>(out, at, v0);
                store_elem<T>(out, at + 1, v1);
            } else {
                float* po = partialO + (head * splits + split) * kLdRank + col;
                po[0] = v0;
                po[1] = v1;
            }
        }
        if (!whole && warp == 0 && t == 0) {
            partialLse[head * splits + split] = l[i] > 0.f ? m[i] + log2f(l[i]) : -INFINITY;
        }
    }
}

// One block per (query row, head) of latent_attention_mma's split launch: the slices' partials weighted by
// 2^(lse - max), over their total. Rows of one slice were written by the attention kernel.
extern "C" __global__ void __launch_bounds__(kLatentThreads) latent_attention_merge(
        const int* qoIndptr, const int* kvIndptr, const int* lastPageLen, const float* partialO,
        const float* partialLse, __nv_bfloat16* out, int seqs, int heads, int pageSize, int causal, int windowLeft,
        int contextOnly, int splits) {
    await_previous_kernel();
    const int row = blockIdx.x / heads, h = blockIdx.x - row * heads;
    const int slices = LatentRowSlices::of(row, seqs, qoIndptr, kvIndptr, lastPageLen, pageSize, causal, windowLeft,
                                           contextOnly, splits).slices;
    if (slices == 1) return;
    const long long head = (long long)row * heads + h;
    const float* lse = partialLse + head * splits;
    float mx = -INFINITY;
    for (int s = 0; s < slices; ++s) mx = fmaxf(mx, lse[s]);
    float total = 0.f;
    if (mx != -INFINITY) {
        for (int s = 0; s < slices; ++s) total += exp2f(lse[s] - mx);
    }
    const float inv = total > 0.f ? 1.f / total : 0.f;
    for (int c = threadIdx.x; c < kLdRank; c += blockDim.x) {
        float o = 0.f;
        if (total > 0.f) {
            for (int s = 0; s < slices; ++s) o += exp2f(lse[s] - mx) * partialO[(head * splits + s) * kLdRank + c];
        }
        store_elem<__nv_bfloat16>(out, head * kLdRank + c, o * inv);
    }
}
