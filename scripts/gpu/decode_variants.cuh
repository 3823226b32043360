// Variants of the paged decode attention kernel (attention_decode.cu) for decode_kernel_bench.cu. They keep
// its plan, slicing and one-launch merge (same arguments, same splits / slices / grid width computed by the
// launcher) and change only how a block walks its slice:
//   SimtDecode<WARPS, U, STAGES>: the current CUDA-core kernel with its pipeline made a parameter (deeper
//     cp.async staging, more tokens per lane per step, more warps).
//   MmaDecode<WARPS, KW, STAGES>: tensor cores. A warp owns KW-key chunks of the slice (cp.async, STAGES deep
//     per warp); the GH query heads of the KV head are rows 0..GH-1 of an m16n8k16 A tile (rows GH..15 zero),
//     S = Q K^T with K from shared memory as the B operand (ldmatrix), online softmax on the fp32 S fragment,
//     and O += P V with P re-packed from the S fragment as the A operand and V through ldmatrix.trans, as the
//     tensor-core prefill kernel does. Per 16 keys a warp issues ~100 instructions where the CUDA-core kernel
//     issues ~60 per key (bf16 conversions, 16-lane shuffles, fp32 FMAs), so issue should stop bounding it.
//     Costs 64 accumulator registers (rows 8..15 included) and 12 of 16 tile rows are padding.
//   MmaTDecode<WARPS, KW, STAGES>: tensor cores with keys as the tile's rows (S^T = K Q^T, O^T = V^T P^T): half
//     the mma of MmaDecode and 32 accumulator registers; P^T is transposed in registers by movmatrix.
// Needs attention_decode.cu included first (its slicing constants, and the mma helpers of mma.cuh).
#pragma once

namespace dv {

// After each slot (a softmax state of GH rows) has written m (log2 units), l and its D accumulators for a
// slice into shared memory: merge the slots and write the slice's output or partial. As attention_decode.cu.
template <typename T, int D, int GH, int SLOTS, int THREADS>
__device__ __forceinline__ void finish_slice(float* smM, int r, int h0, int qBegin, int qoHeads, int slices,
                                             int split, int sliceStride, T* out, float* partialO,
                                             float* partialLse) {
    float* smL = smM + SLOTS * GH;
    float* smW = smL + SLOTS * GH;
    float* smTotal = smW + SLOTS * GH;
    float* smAcc = smTotal + GH;
    __syncthreads();
    if (threadIdx.x < GH) {
        const int j = threadIdx.x;
        float mAll = -INFINITY;
        for (int s = 0; s < SLOTS; ++s) mAll = fmaxf(mAll, smM[s * GH + j]);
        float total = 0.f;
        for (int s = 0; s < SLOTS; ++s) {
            const float w = mAll == -INFINITY ? 0.f : exp2f(smM[s * GH + j] - mAll);
            smW[s * GH + j] = w;
            total += w * smL[s * GH + j];
        }
        smTotal[j] = total;
        if (slices > 1) {
            partialLse[((long long)r * qoHeads + h0 + j) * sliceStride + split] =
                total > 0.f ? mAll + log2f(total) : -INFINITY;
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < GH * D; idx += THREADS) {
        const int j = idx / D, d = idx - j * D;
        float o = 0.f;
        for (int s = 0; s < SLOTS; ++s) o += smW[s * GH + j] * smAcc[(s * GH + j) * D + d];
        const float v = smTotal[j] > 0.f ? o / smTotal[j] : 0.f;
        if (slices == 1) {
            store_elem<T>(out, ((long long)qBegin * qoHeads + h0 + j) * D + d, v);
        } else {
            partialO[(((long long)r * qoHeads + h0 + j) * sliceStride + split) * D + d] = v;
        }
    }
}

// The block that completes a sequence's last slice merges the partials (attention_decode.cu's tail).
template <typename T, int D, int GH, int WARPS>
__device__ __forceinline__ void merge_slices(float* scratch, int* lastBlock, int r, int h0, int qBegin,
                                             int qoHeads, int slices, int sliceStride, T* out,
                                             const float* partialO, const float* partialLse, int* splitDone) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int stride = gridDim.x;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const int mine = (slices - 1 - blockIdx.x) / stride + 1;
        int* done = splitDone + (long long)r * gridDim.y + blockIdx.y;
        *lastBlock = atomicAdd(done, mine) + mine == slices;
        if (*lastBlock) *done = 0;
    }
    __syncthreads();
    if (!*lastBlock) return;
    __threadfence();
    float* mergeMax = scratch;
    float* mergeTotal = scratch + GH;
    for (int j = warp; j < GH; j += WARPS) {
        const float* lse = partialLse + ((long long)r * qoHeads + h0 + j) * sliceStride;
        float mAll = -INFINITY;
        for (int s = lane; s < slices; s += 32) mAll = fmaxf(mAll, __ldcg(lse + s));
        mAll = warp_max(mAll);
        float total = 0.f;
        if (mAll != -INFINITY) {
            for (int s = lane; s < slices; s += 32) total += exp2f(__ldcg(lse + s) - mAll);
        }
        total = warp_sum(total);
        if (lane == 0) {
            mergeMax[j] = mAll;
            mergeTotal[j] = total;
        }
    }
    __syncthreads();
    constexpr int D4 = D / 4;
    for (int idx = threadIdx.x; idx < GH * D4; idx += WARPS * 32) {
        const int j = idx / D4, d4 = idx - j * D4;
        const long long head = (long long)r * qoHeads + h0 + j;
        const float total = mergeTotal[j], mx = mergeMax[j];
        const float* lse = partialLse + head * sliceStride;
        const float4* po = reinterpret_cast<const float4*>(partialO + head * sliceStride * D) + d4;
        float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
        if (total > 0.f) {
#pragma unroll 8
            for (int s = 0; s < slices; ++s) {
                const float w = exp2f(__ldcg(lse + s) - mx);
                const float4 p = __ldcg(po + (long long)s * D4);
                o.x += w * p.x;
                o.y += w * p.y;
                o.z += w * p.z;
                o.w += w * p.w;
            }
        }
        const float inv = total > 0.f ? 1.f / total : 0.f;
        const long long at = ((long long)qBegin * qoHeads + h0 + j) * D + d4 * 4;
        store_elem<T>(out, at, o.x * inv);
        store_elem<T>(out, at + 1, o.y * inv);
        store_elem<T>(out, at + 2, o.z * inv);
        store_elem<T>(out, at + 3, o.w * inv);
    }
}

// What every variant's block does before its slices: which sequence, heads and key range it serves.
struct BlockPlan {
    int r, g, h0, qBegin, lo, hi, keys, slices;
    bool active;

    template <int GH>
    __device__ __forceinline__ static BlockPlan of(PagedKv kv, Mask mask, const int* qoIndptr, int qoHeads,
                                                   int splits) {
        BlockPlan p;
        p.r = blockIdx.z;
        const int group = qoHeads / kv.kvHeads;
        const int blocksPerKvHead = group / GH;
        p.g = blockIdx.y / blocksPerKvHead;
        p.h0 = p.g * group + (blockIdx.y % blocksPerKvHead) * GH;
        p.qBegin = qoIndptr[p.r];
        const int qLen = qoIndptr[p.r + 1] - p.qBegin;
        p.active = qLen > 0;
        if (!p.active) return p;
        const int kvLen = kv.length(p.r);
        mask.visible(kvLen, qLen, kvLen - qLen, p.lo, p.hi);
        p.keys = slice_keys(p.hi - p.lo, splits, kv.pageSize);
        p.slices = max(1, (p.hi - p.lo + p.keys - 1) / p.keys);
        p.active = blockIdx.x < p.slices;
        return p;
    }
};

// Fills pageBase with the pool offsets (elements) of the K pages of keys [kBegin, kEnd).
__device__ __forceinline__ void load_page_table(PagedKv kv, int r, int kBegin, int kEnd, int D,
                                                long long* pageBase) {
    const long long pageElems = (long long)kv.pageSize * kv.kvHeads * D;
    if (kBegin < kEnd) {
        const int firstPage = kBegin / kv.pageSize;
        const int pages = (kEnd - 1) / kv.pageSize - firstPage + 1;
        const int* ids = kv.kvIndices + kv.kvIndptr[r] + firstPage;
        for (int i = threadIdx.x; i < pages; i += blockDim.x) {
            pageBase[i] = ((long long)kv.layer * kv.numPages + ids[i]) * 2 * pageElems;
        }
    }
}

#define DV_KERNEL_PARAMS                                                                                       \
    const T *q, const void *pool, const int *qoIndptr, const int *kvIndptr, const int *kvIndices,               \
        const int *lastPageLen, int layer, int numPages, int pageSize, int qoHeads, int kvHeads, int causal,    \
        int windowLeft, int contextOnly, float smScale, int splits, int sliceStride, T *out, float *partialO,   \
        float *partialLse, int *splitDone

// ---------------------------------------------------------------------------------------------------------------
// CUDA-core kernel with the pipeline as parameters (attention_decode.cu at WARPS 4, U 4, STAGES 2 for d128 g4).
template <typename T, int D, int GH, int WARPS_, int U_, int STAGES_, int MIN_BLOCKS_>
struct SimtDecode {
    using Type = T;
    static constexpr int WARPS = WARPS_, THREADS = WARPS * 32, MIN_BLOCKS = MIN_BLOCKS_, HEADS = GH;
    static constexpr int VEC = 16 / sizeof(T);
    static constexpr int EPL = D / 32 > VEC ? D / 32 : VEC;
    static constexpr int CHUNKS = EPL / VEC;
    static constexpr int LPT = D / EPL;
    static constexpr int TPW = 32 / LPT;
    static constexpr int SLOTS = WARPS * TPW;
    static constexpr int U = U_;
    static constexpr int STAGES = STAGES_;
    static constexpr int WARP_STAGE_BYTES = U * 2 * CHUNKS * 32 * 16;
    static constexpr int STAGING_BYTES = WARP_STAGE_BYTES * WARPS * STAGES;
    static constexpr int COMBINE_BYTES = (SLOTS * GH * (D + 3) + GH) * 4;
    static constexpr int SMEM_BYTES = STAGING_BYTES > COMBINE_BYTES ? STAGING_BYTES : COMBINE_BYTES;

    __device__ __forceinline__ static void run(DV_KERNEL_PARAMS) {
        unsigned char* smem = dynamic_smem();
        __shared__ long long pageBase[kSplitPages];
        __shared__ int lastBlock;
        const PagedKv kv{pool, kvIndptr, kvIndices, lastPageLen, layer, numPages, pageSize, kvHeads};
        const BlockPlan p = BlockPlan::of<GH>(kv, Mask{causal, windowLeft, contextOnly}, qoIndptr, qoHeads, splits);
        if (!p.active) return;
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const int slotInWarp = lane / LPT, sub = lane % LPT;
        const int slot = warp * TPW + slotInWarp;

        float qf[GH][EPL];
#pragma unroll
        for (int j = 0; j < GH; ++j) {
            load_row<EPL>(q + ((long long)p.qBegin * qoHeads + p.h0 + j) * D + sub * EPL, qf[j]);
#pragma unroll
            for (int e = 0; e < EPL; ++e) qf[j][e] *= smScale * kLog2e;
        }
        const long long pageElems = (long long)kv.pageSize * kv.kvHeads * D;
        const T* base = static_cast<const T*>(kv.pool);
        const int laneOffset = p.g * D + sub * EPL;
        unsigned char* warpStaging = smem + warp * STAGES * WARP_STAGE_BYTES;
        float* smM = reinterpret_cast<float*>(smem);
        float* smL = smM + SLOTS * GH;
        float* smAcc = smM + 3 * SLOTS * GH + GH;  // after m, l, w and the totals (finish_slice)

        for (int split = blockIdx.x; split < p.slices; split += gridDim.x) {
            const int kBegin = p.lo + split * p.keys;
            const int kEnd = min(p.hi, kBegin + p.keys);
            const int firstPage = kBegin / kv.pageSize;
            __syncthreads();
            load_page_table(kv, p.r, kBegin, kEnd, D, pageBase);
            __syncthreads();

            float m[GH], l[GH], acc[GH][EPL];
#pragma unroll
            for (int j = 0; j < GH; ++j) {
                m[j] = -INFINITY;
                l[j] = 0.f;
#pragma unroll
                for (int e = 0; e < EPL; ++e) acc[j][e] = 0.f;
            }
            const int warpFirst = kBegin + warp * TPW * U;
            const int steps = warpFirst < kEnd ? (kEnd - warpFirst + SLOTS * U - 1) / (SLOTS * U) : 0;

            auto issue = [&](int step) {
                unsigned char* stage = warpStaging + (step % STAGES) * WARP_STAGE_BYTES;
                const int t0 = warpFirst + step * SLOTS * U + slotInWarp * U;
                int page = t0 / kv.pageSize;
                int slotInPage = t0 - page * kv.pageSize;
                page -= firstPage;
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const bool valid = t0 + u < kEnd;
                    const T* k = base;
                    if (valid) k = base + pageBase[page] + slotInPage * kv.kvHeads * D + laneOffset;
                    if (++slotInPage == kv.pageSize) {
                        slotInPage = 0;
                        ++page;
                    }
#pragma unroll
                    for (int c = 0; c < CHUNKS; ++c) {
                        cp_async16(stage + (((u * 2 + 0) * CHUNKS + c) * 32 + lane) * 16, k + c * VEC, valid);
                        cp_async16(stage + (((u * 2 + 1) * CHUNKS + c) * 32 + lane) * 16,
                                   valid ? k + pageElems + c * VEC : k, valid);
                    }
                }
            };

#pragma unroll
            for (int s = 0; s < STAGES - 1; ++s) {
                if (s < steps) issue(s);
                cp_async_commit();
            }
            for (int step = 0; step < steps; ++step) {
                if (step + STAGES - 1 < steps) issue(step + STAGES - 1);
                cp_async_commit();
                cp_async_wait<STAGES - 1>();
                const unsigned char* stage = warpStaging + (step % STAGES) * WARP_STAGE_BYTES;
                const int t0 = warpFirst + step * SLOTS * U + slotInWarp * U;
                float s[U][GH];
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    float kf[EPL];
                    load_staged<T, EPL, CHUNKS>(stage + (u * 2 + 0) * CHUNKS * 32 * 16, lane, kf);
#pragma unroll
                    for (int j = 0; j < GH; ++j) {
                        float d = 0.f;
#pragma unroll
                        for (int e = 0; e < EPL; ++e) d += qf[j][e] * kf[e];
#pragma unroll
                        for (int o = LPT / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
                        s[u][j] = t0 + u < kEnd ? d : -INFINITY;
                    }
                }
#pragma unroll
                for (int j = 0; j < GH; ++j) {
                    float mx = s[0][j];
#pragma unroll
                    for (int u = 1; u < U; ++u) mx = fmaxf(mx, s[u][j]);
                    const float mNew = fmaxf(m[j], mx);
                    const float alpha = mNew == -INFINITY ? 1.f : exp2f(m[j] - mNew);
                    l[j] *= alpha;
#pragma unroll
                    for (int e = 0; e < EPL; ++e) acc[j][e] *= alpha;
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        s[u][j] = mNew == -INFINITY ? 0.f : exp2f(s[u][j] - mNew);
                        l[j] += s[u][j];
                    }
                    m[j] = mNew;
                }
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    float vf[EPL];
                    load_staged<T, EPL, CHUNKS>(stage + (u * 2 + 1) * CHUNKS * 32 * 16, lane, vf);
#pragma unroll
                    for (int j = 0; j < GH; ++j) {
#pragma unroll
                        for (int e = 0; e < EPL; ++e) acc[j][e] += s[u][j] * vf[e];
                    }
                }
            }
            cp_async_wait<0>();
            __syncthreads();
#pragma unroll
            for (int j = 0; j < GH; ++j) {
#pragma unroll
                for (int e = 0; e < EPL; ++e) smAcc[(slot * GH + j) * D + sub * EPL + e] = acc[j][e];
                if (sub == 0) {
                    smM[slot * GH + j] = m[j];
                    smL[slot * GH + j] = l[j];
                }
            }
            finish_slice<T, D, GH, SLOTS, THREADS>(smM, p.r, p.h0, p.qBegin, qoHeads, p.slices, split, sliceStride,
                                                   out, partialO, partialLse);
        }
        if (p.slices == 1) return;
        merge_slices<T, D, GH, WARPS>(reinterpret_cast<float*>(smem), &lastBlock, p.r, p.h0, p.qBegin, qoHeads,
                                      p.slices, sliceStride, out, partialO, partialLse, splitDone);
    }
};

// ---------------------------------------------------------------------------------------------------------------
// Tensor cores (bf16). A warp's softmax state covers the GH rows (lane / 4 < GH hold them; the 4 lanes of a
// row hold 2 of each 8 columns). KW keys per warp stage: 16 gives two 8-key S tiles, 32 four.
template <int D, int GH, int WARPS_, int KW, int STAGES_, int MIN_BLOCKS_>
struct MmaDecode {
    using T = __nv_bfloat16;
    using Type = T;
    static_assert(GH <= 8 && D % 16 == 0 && KW % 16 == 0, "rows 0..7 of the tile hold the heads");
    static constexpr int WARPS = WARPS_, THREADS = WARPS * 32, MIN_BLOCKS = MIN_BLOCKS_, HEADS = GH;
    static constexpr int STAGES = STAGES_;
    static constexpr int SLOTS = WARPS;
    static constexpr int STRIDE = D + 8;  // padded rows: ldmatrix rows land in distinct banks
    static constexpr int CHUNKS = D / 8;  // 16-byte pieces per row
    static constexpr int STAGE_ELEMS = 2 * KW * STRIDE;  // K then V
    static constexpr int STAGING_BYTES = WARPS * STAGES * STAGE_ELEMS * 2;
    static constexpr int COMBINE_BYTES = (SLOTS * GH * (D + 3) + GH) * 4;
    static constexpr int SMEM_BYTES = STAGING_BYTES > COMBINE_BYTES ? STAGING_BYTES : COMBINE_BYTES;
    static constexpr int NT = KW / 8;  // 8-key S tiles per stage
    // With one k chain per S tile the 8 dependent mma of a 16-key stage serialise; two chains halve that.
    static constexpr int CHAINS = NT >= 4 ? 1 : 2;

    __device__ __forceinline__ static void run(DV_KERNEL_PARAMS) {
        unsigned char* smem = dynamic_smem();
        __shared__ long long pageBase[kSplitPages];
        __shared__ int lastBlock;
        const PagedKv kv{pool, kvIndptr, kvIndices, lastPageLen, layer, numPages, pageSize, kvHeads};
        const BlockPlan p = BlockPlan::of<GH>(kv, Mask{causal, windowLeft, contextOnly}, qoIndptr, qoHeads, splits);
        if (!p.active) return;
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const int row = lane >> 2, quad = lane & 3;
        const bool rowValid = row < GH;

        // Q A fragments: a0 = row, columns 2 quad (+1); a2 = the same 8 columns on; rows 8..15 (a1, a3) are zero.
        uint32_t qa[D / 16][2];
#pragma unroll
        for (int kd = 0; kd < D / 16; ++kd) {
            const uint32_t* src = reinterpret_cast<const uint32_t*>(
                q + ((long long)p.qBegin * qoHeads + p.h0 + (rowValid ? row : 0)) * D + kd * 16 + 2 * quad);
            qa[kd][0] = rowValid ? src[0] : 0u;
            qa[kd][1] = rowValid ? src[4] : 0u;
        }
        const float scaleLog2 = smScale * kLog2e;
        const long long pageElems = (long long)kv.pageSize * kv.kvHeads * D;
        const T* base = static_cast<const T*>(kv.pool) + p.g * D;
        const int slotStride = kv.kvHeads * D;
        T* warpStaging = reinterpret_cast<T*>(smem) + warp * STAGES * STAGE_ELEMS;
        float* smM = reinterpret_cast<float*>(smem);
        float* smL = smM + SLOTS * GH;
        float* smAcc = smM + 3 * SLOTS * GH + GH;  // after m, l, w and the totals (finish_slice)
        // ldmatrix lane addresses (attention_prefill_mma.cu): K as B, keys lane % 8 + 8 (lane / 16), d half
        // (lane / 8) % 2; V with .trans: keys lane % 8 + 8 ((lane / 8) % 2), d half lane / 16.
        const int kRow = (lane & 7) + ((lane >> 4) << 3), kCol = ((lane >> 3) & 1) * 8;
        const int vRow = (lane & 7) + (((lane >> 3) & 1) << 3), vCol = (lane >> 4) * 8;
        // Copy lanes: lane owns 16-byte piece lane % CHUNKS of keys lane / CHUNKS, + 32 / CHUNKS, ...
        constexpr int KEYS_PER_PASS = 32 / CHUNKS > 0 ? 32 / CHUNKS : 1;
        static_assert(CHUNKS <= 32 && 32 % CHUNKS == 0, "a pass covers whole rows");
        const int copyKey = lane / CHUNKS, copyChunk = lane % CHUNKS;

        for (int split = blockIdx.x; split < p.slices; split += gridDim.x) {
            const int kBegin = p.lo + split * p.keys;
            const int kEnd = min(p.hi, kBegin + p.keys);
            const int firstPage = kBegin / kv.pageSize;
            __syncthreads();
            load_page_table(kv, p.r, kBegin, kEnd, D, pageBase);
            __syncthreads();

            float o[D / 8][4];
#pragma unroll
            for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
            float m = -INFINITY, l = 0.f;

            const int warpFirst = kBegin + warp * KW;
            const int steps = warpFirst < kEnd ? (kEnd - warpFirst + WARPS * KW - 1) / (WARPS * KW) : 0;

            auto issue = [&](int step) {
                T* ks = warpStaging + (step % STAGES) * STAGE_ELEMS;
                T* vs = ks + KW * STRIDE;
                const int t0 = warpFirst + step * WARPS * KW + copyKey;
                int page = t0 / kv.pageSize;
                int slotInPage = t0 - page * kv.pageSize;
                page -= firstPage;
#pragma unroll
                for (int i = 0; i < KW / KEYS_PER_PASS; ++i) {
                    const int j = copyKey + i * KEYS_PER_PASS;
                    const bool valid = t0 + i * KEYS_PER_PASS < kEnd;
                    const T* k = valid ? base + pageBase[page] + slotInPage * slotStride + copyChunk * 8 : base;
                    cp_async16(ks + j * STRIDE + copyChunk * 8, k, valid);
                    cp_async16(vs + j * STRIDE + copyChunk * 8, valid ? k + pageElems : k, valid);
                    slotInPage += KEYS_PER_PASS;
                    while (slotInPage >= kv.pageSize) {
                        slotInPage -= kv.pageSize;
                        ++page;
                    }
                }
            };

#pragma unroll
            for (int s = 0; s < STAGES - 1; ++s) {
                if (s < steps) issue(s);
                cp_async_commit();
            }
            for (int step = 0; step < steps; ++step) {
                if (step + STAGES - 1 < steps) issue(step + STAGES - 1);
                cp_async_commit();
                cp_async_wait<STAGES - 1>();
                __syncwarp();  // the stage's rows were copied by every lane of the warp
                const T* ks = warpStaging + (step % STAGES) * STAGE_ELEMS;
                const T* vs = ks + KW * STRIDE;
                const uint32_t kAddr = smem_addr(ks + kRow * STRIDE + kCol);
                const uint32_t vAddr = smem_addr(vs + vRow * STRIDE + vCol);

                float sc[CHAINS][NT][4];
#pragma unroll
                for (int c = 0; c < CHAINS; ++c)
#pragma unroll
                    for (int n = 0; n < NT; ++n) sc[c][n][0] = sc[c][n][1] = sc[c][n][2] = sc[c][n][3] = 0.f;
#pragma unroll
                for (int kd = 0; kd < D / 16; ++kd) {
                    const uint32_t a[4] = {qa[kd][0], 0u, qa[kd][1], 0u};
#pragma unroll
                    for (int n2 = 0; n2 < NT / 2; ++n2) {
                        uint32_t b[4];
                        ldmatrix_x4(b, kAddr + (n2 * 16 * STRIDE + kd * 16) * 2);
                        mma_bf16(sc[kd % CHAINS][2 * n2], a, b[0], b[1]);
                        mma_bf16(sc[kd % CHAINS][2 * n2 + 1], a, b[2], b[3]);
                    }
                }
                // Online softmax on columns 0, 1 of each S tile (row lane / 4); raw scores, scaled in the exp.
                const int t0 = warpFirst + step * WARPS * KW;
                float s[NT][2];
                float mx = -INFINITY;
#pragma unroll
                for (int n = 0; n < NT; ++n) {
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        float v = sc[0][n][e];
                        if (CHAINS > 1) v += sc[CHAINS - 1][n][e];
                        s[n][e] = t0 + n * 8 + 2 * quad + e < kEnd ? v : -INFINITY;
                        mx = fmaxf(mx, s[n][e]);
                    }
                }
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float mNew = fmaxf(m, mx);  // finite: the stage's first key is visible
                const float b = mNew * scaleLog2;
                const float alpha = fast_exp2(m * scaleLog2 - b);
                m = mNew;
                float sum = 0.f;
#pragma unroll
                for (int n = 0; n < NT; ++n) {
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        s[n][e] = fast_exp2(fmaf(s[n][e], scaleLog2, -b));
                        sum += s[n][e];
                    }
                }
                l = l * alpha + sum;
#pragma unroll
                for (int n = 0; n < D / 8; ++n) {
                    o[n][0] *= alpha;
                    o[n][1] *= alpha;
                }
#pragma unroll
                for (int kk = 0; kk < KW / 16; ++kk) {
                    const uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), 0u,
                                           pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]), 0u};
#pragma unroll
                    for (int n2 = 0; n2 < D / 16; ++n2) {
                        uint32_t bv[4];
                        ldmatrix_x4_trans(bv, vAddr + (kk * 16 * STRIDE + n2 * 16) * 2);
                        mma_bf16(o[2 * n2], a, bv[0], bv[1]);
                        mma_bf16(o[2 * n2 + 1], a, bv[2], bv[3]);
                    }
                }
                __syncwarp();  // every lane is done with the stage before it is refilled
            }
            cp_async_wait<0>();
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            __syncthreads();  // the combine reuses the staging memory
            if (rowValid) {
#pragma unroll
                for (int n = 0; n < D / 8; ++n) {
                    smAcc[(warp * GH + row) * D + n * 8 + 2 * quad] = o[n][0];
                    smAcc[(warp * GH + row) * D + n * 8 + 2 * quad + 1] = o[n][1];
                }
                if (quad == 0) {
                    smM[warp * GH + row] = steps > 0 ? m * scaleLog2 : -INFINITY;
                    smL[warp * GH + row] = l;
                }
            }
            finish_slice<T, D, GH, SLOTS, THREADS>(smM, p.r, p.h0, p.qBegin, qoHeads, p.slices, split, sliceStride,
                                                   out, partialO, partialLse);
        }
        if (p.slices == 1) return;
        merge_slices<T, D, GH, WARPS>(reinterpret_cast<float*>(smem), &lastBlock, p.r, p.h0, p.qBegin, qoHeads,
                                      p.slices, sliceStride, out, partialO, partialLse, splitDone);
    }
};

// ---------------------------------------------------------------------------------------------------------------
// Tensor cores with the roles swapped: S^T = K Q^T, keys the 16 rows of the A tile (K through ldmatrix as A) and
// the GH heads columns 0..GH-1 of the B tile (Q's fragments, loaded once), so no row of the tile is padding and
// per 16 keys a warp issues 8 mma for S and 8 for O^T = V^T P^T (V through ldmatrix.trans as A; P^T's B
// fragment is S^T's accumulator packed to bf16 and transposed in registers by movmatrix). O^T takes 32
// registers, against 64 with the heads as rows. attention_decode.cu's attn_decode_tc_* kernels are this body.
template <int D, int GH, int WARPS_, int KW, int STAGES_, int MIN_BLOCKS_>
struct MmaTDecode {
    using T = __nv_bfloat16;
    using Type = T;
    static_assert(GH <= 8 && D % 16 == 0 && KW % 16 == 0, "columns 0..7 of the B tile hold the heads");
    static constexpr int WARPS = WARPS_, THREADS = WARPS * 32, MIN_BLOCKS = MIN_BLOCKS_, HEADS = GH;
    static constexpr int STAGES = STAGES_;
    static constexpr int SLOTS = WARPS;
    static constexpr int STRIDE = D + 8;
    static constexpr int CHUNKS = D / 8;
    static constexpr int STAGE_ELEMS = 2 * KW * STRIDE;
    static constexpr int STAGING_BYTES = WARPS * STAGES * STAGE_ELEMS * 2;
    static constexpr int COMBINE_BYTES = (SLOTS * GH * (D + 3) + GH) * 4;
    static constexpr int SMEM_BYTES = STAGING_BYTES > COMBINE_BYTES ? STAGING_BYTES : COMBINE_BYTES;
    static constexpr int MT = KW / 16;  // 16-key S^T tiles per stage
    static constexpr int CHAINS = MT >= 2 ? 1 : 2;

    __device__ __forceinline__ static void run(DV_KERNEL_PARAMS) {
        unsigned char* smem = dynamic_smem();
        __shared__ long long pageBase[kSplitPages];
        __shared__ int lastBlock;
        const PagedKv kv{pool, kvIndptr, kvIndices, lastPageLen, layer, numPages, pageSize, kvHeads};
        const BlockPlan p = BlockPlan::of<GH>(kv, Mask{causal, windowLeft, contextOnly}, qoIndptr, qoHeads, splits);
        if (!p.active) return;
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const int row = lane >> 2, quad = lane & 3;
        const int col0 = 2 * quad, col1 = 2 * quad + 1;  // this lane's accumulator columns (heads)

        // Q^T B fragments: b0 = head lane / 4, dims 2 quad (+1) of each 16; b1 = the same 8 dims on.
        uint32_t qb[D / 16][2];
        const bool qValid = row < GH;
#pragma unroll
        for (int kd = 0; kd < D / 16; ++kd) {
            const uint32_t* src = reinterpret_cast<const uint32_t*>(
                q + ((long long)p.qBegin * qoHeads + p.h0 + (qValid ? row : 0)) * D + kd * 16 + 2 * quad);
            qb[kd][0] = qValid ? src[0] : 0u;
            qb[kd][1] = qValid ? src[4] : 0u;
        }
        const float scaleLog2 = smScale * kLog2e;
        const long long pageElems = (long long)kv.pageSize * kv.kvHeads * D;
        const T* base = static_cast<const T*>(kv.pool) + p.g * D;
        const int slotStride = kv.kvHeads * D;
        T* warpStaging = reinterpret_cast<T*>(smem) + warp * STAGES * STAGE_ELEMS;
        float* smM = reinterpret_cast<float*>(smem);
        float* smL = smM + SLOTS * GH;
        float* smAcc = smM + 3 * SLOTS * GH + GH;  // after m, l, w and the totals (finish_slice)
        // ldmatrix lane addresses: K as A (keys lane % 16, d half lane / 16); V^T as A through .trans (keys
        // lane % 8 + 8 (lane / 16), d half (lane / 8) % 2).
        const int kRow = lane & 15, kCol = (lane >> 4) * 8;
        const int vRow = (lane & 7) + ((lane >> 4) << 3), vCol = ((lane >> 3) & 1) * 8;
        constexpr int KEYS_PER_PASS = 32 / CHUNKS;
        static_assert(CHUNKS <= 32 && 32 % CHUNKS == 0, "a pass covers whole rows");
        const int copyKey = lane / CHUNKS, copyChunk = lane % CHUNKS;

        for (int split = blockIdx.x; split < p.slices; split += gridDim.x) {
            const int kBegin = p.lo + split * p.keys;
            const int kEnd = min(p.hi, kBegin + p.keys);
            const int firstPage = kBegin / kv.pageSize;
            __syncthreads();
            load_page_table(kv, p.r, kBegin, kEnd, D, pageBase);
            __syncthreads();

            float o[D / 16][4];
#pragma unroll
            for (int n = 0; n < D / 16; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
            float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;

            const int warpFirst = kBegin + warp * KW;
            const int steps = warpFirst < kEnd ? (kEnd - warpFirst + WARPS * KW - 1) / (WARPS * KW) : 0;

            auto issue = [&](int step) {
                T* ks = warpStaging + (step % STAGES) * STAGE_ELEMS;
                T* vs = ks + KW * STRIDE;
                const int t0 = warpFirst + step * WARPS * KW + copyKey;
                int page = t0 / kv.pageSize;
                int slotInPage = t0 - page * kv.pageSize;
                page -= firstPage;
#pragma unroll
                for (int i = 0; i < KW / KEYS_PER_PASS; ++i) {
                    const int j = copyKey + i * KEYS_PER_PASS;
                    const bool valid = t0 + i * KEYS_PER_PASS < kEnd;
                    const T* k = valid ? base + pageBase[page] + slotInPage * slotStride + copyChunk * 8 : base;
                    cp_async16(ks + j * STRIDE + copyChunk * 8, k, valid);
                    cp_async16(vs + j * STRIDE + copyChunk * 8, valid ? k + pageElems : k, valid);
                    slotInPage += KEYS_PER_PASS;
                    while (slotInPage >= kv.pageSize) {
                        slotInPage -= kv.pageSize;
                        ++page;
                    }
                }
            };

#pragma unroll
            for (int s = 0; s < STAGES - 1; ++s) {
                if (s < steps) issue(s);
                cp_async_commit();
            }
            for (int step = 0; step < steps; ++step) {
                if (step + STAGES - 1 < steps) issue(step + STAGES - 1);
                cp_async_commit();
                cp_async_wait<STAGES - 1>();
                __syncwarp();  // the stage's rows were copied by every lane of the warp
                const T* ks = warpStaging + (step % STAGES) * STAGE_ELEMS;
                const T* vs = ks + KW * STRIDE;
                const uint32_t kAddr = smem_addr(ks + kRow * STRIDE + kCol);
                const uint32_t vAddr = smem_addr(vs + vRow * STRIDE + vCol);

                float sc[CHAINS][MT][4];
#pragma unroll
                for (int c = 0; c < CHAINS; ++c)
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) sc[c][mt][0] = sc[c][mt][1] = sc[c][mt][2] = sc[c][mt][3] = 0.f;
#pragma unroll
                for (int kd = 0; kd < D / 16; ++kd) {
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        uint32_t a[4];
                        ldmatrix_x4(a, kAddr + (mt * 16 * STRIDE + kd * 16) * 2);
                        mma_bf16(sc[kd % CHAINS][mt], a, qb[kd][0], qb[kd][1]);
                    }
                }
                // Online softmax per head column: the lane holds keys lane / 4 (+ 8) of each tile; the column's
                // other keys are on the lanes of the same quad.
                const int t0 = warpFirst + step * WARPS * KW;
                float s[MT][4];
                float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        float v = sc[0][mt][e];
                        if (CHAINS > 1) v += sc[CHAINS - 1][mt][e];
                        s[mt][e] = t0 + mt * 16 + row + (e >> 1) * 8 < kEnd ? v : -INFINITY;
                    }
                    mx0 = fmaxf(mx0, fmaxf(s[mt][0], s[mt][2]));
                    mx1 = fmaxf(mx1, fmaxf(s[mt][1], s[mt][3]));
                }
#pragma unroll
                for (int x = 4; x < 32; x <<= 1) {
                    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
                    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
                }
                const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);  // finite: the stage's first key is visible
                const float b0 = n0 * scaleLog2, b1 = n1 * scaleLog2;
                const float alpha0 = fast_exp2(m0 * scaleLog2 - b0), alpha1 = fast_exp2(m1 * scaleLog2 - b1);
                m0 = n0;
                m1 = n1;
                float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    s[mt][0] = fast_exp2(fmaf(s[mt][0], scaleLog2, -b0));
                    s[mt][1] = fast_exp2(fmaf(s[mt][1], scaleLog2, -b1));
                    s[mt][2] = fast_exp2(fmaf(s[mt][2], scaleLog2, -b0));
                    s[mt][3] = fast_exp2(fmaf(s[mt][3], scaleLog2, -b1));
                    sum0 += s[mt][0] + s[mt][2];
                    sum1 += s[mt][1] + s[mt][3];
                }
                l0 = l0 * alpha0 + sum0;
                l1 = l1 * alpha1 + sum1;
#pragma unroll
                for (int n = 0; n < D / 16; ++n) {
                    o[n][0] *= alpha0;
                    o[n][1] *= alpha1;
                    o[n][2] *= alpha0;
                    o[n][3] *= alpha1;
                }
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    // P^T's B fragment: keys 2 quad (+1) and 8 on, head lane / 4.
                    const uint32_t pb0 = movmatrix_trans(pack_bf16(s[mt][0], s[mt][1]));
                    const uint32_t pb1 = movmatrix_trans(pack_bf16(s[mt][2], s[mt][3]));
#pragma unroll
                    for (int n = 0; n < D / 16; ++n) {
                        uint32_t a[4];
                        ldmatrix_x4_trans(a, vAddr + (mt * 16 * STRIDE + n * 16) * 2);
                        mma_bf16(o[n], a, pb0, pb1);
                    }
                }
                __syncwarp();  // every lane is done with the stage before it is refilled
            }
            cp_async_wait<0>();
#pragma unroll
            for (int x = 4; x < 32; x <<= 1) {
                l0 += __shfl_xor_sync(0xffffffffu, l0, x);
                l1 += __shfl_xor_sync(0xffffffffu, l1, x);
            }
            __syncthreads();  // the combine reuses the staging memory
#pragma unroll
            for (int n = 0; n < D / 16; ++n) {
                const int d = n * 16 + row;
                if (col0 < GH) {
                    smAcc[(warp * GH + col0) * D + d] = o[n][0];
                    smAcc[(warp * GH + col0) * D + d + 8] = o[n][2];
                }
                if (col1 < GH) {
                    smAcc[(warp * GH + col1) * D + d] = o[n][1];
                    smAcc[(warp * GH + col1) * D + d + 8] = o[n][3];
                }
            }
            if (row == 0) {
                if (col0 < GH) {
                    smM[warp * GH + col0] = steps > 0 ? m0 * scaleLog2 : -INFINITY;
                    smL[warp * GH + col0] = l0;
                }
                if (col1 < GH) {
                    smM[warp * GH + col1] = steps > 0 ? m1 * scaleLog2 : -INFINITY;
                    smL[warp * GH + col1] = l1;
                }
            }
            finish_slice<T, D, GH, SLOTS, THREADS>(smM, p.r, p.h0, p.qBegin, qoHeads, p.slices, split, sliceStride,
                                                   out, partialO, partialLse);
        }
        if (p.slices == 1) return;
        merge_slices<T, D, GH, WARPS>(reinterpret_cast<float*>(smem), &lastBlock, p.r, p.h0, p.qBegin, qoHeads,
                                      p.slices, sliceStride, out, partialO, partialLse, splitDone);
    }
};

template <class V>
__global__ void __launch_bounds__(V::THREADS, V::MIN_BLOCKS) decode_variant(
    const typename V::Type* q, const void* pool, const int* qoIndptr, const int* kvIndptr, const int* kvIndices,
    const int* lastPageLen, int layer, int numPages, int pageSize, int qoHeads, int kvHeads, int causal,
    int windowLeft, int contextOnly, float smScale, int splits, int sliceStride, typename V::Type* out,
    float* partialO, float* partialLse, int* splitDone) {
    V::run(q, pool, qoIndptr, kvIndptr, kvIndices, lastPageLen, layer, numPages, pageSize, qoHeads, kvHeads, causal,
           windowLeft, contextOnly, smScale, splits, sliceStride, out, partialO, partialLse, splitDone);
}

}  // namespace dv
