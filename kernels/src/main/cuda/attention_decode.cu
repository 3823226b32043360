// Paged decode attention (one query per sequence), split-KV: block (x, head group, sequence) runs an online
// softmax over slices of the visible keys for GH query heads that share one KV head, so each K/V row is read
// once for the whole group. A sequence's slice length comes from its own length and the launcher's split
// count (sized from the step's batch so the blocks fill the GPU): at least kMinSplitKeys, so short sequences
// are not cut into slivers, and at most kMaxSliceKeys (and what the shared page table holds), so one long
// sequence in a large batch is still spread over several blocks. Block x walks slices x, x + gridDim.x, ...
// With one slice the block writes the output; otherwise each slice writes a normalised partial and its
// log2-sum-exp, and the block that finishes a sequence's last slice (counted in splitDone, which it resets to
// zero) merges them: no second launch.
#include "attention.cuh"

using namespace mstar;

namespace {

constexpr int kDecodeWarps = 4;
// Shortest and longest slice, and the slice's page-table capacity; CudaAttention.MIN_SPLIT_KEYS,
// MAX_SLICE_KEYS and SPLIT_PAGES must equal them.
constexpr int kMinSplitKeys = 128;
constexpr int kMaxSliceKeys = 2048;
constexpr int kSplitPages = 512;

// Keys per slice of a sequence whose visible span is span keys, cut into up to splits slices.
__device__ __forceinline__ int slice_keys(int span, int splits, int pageSize) {
    const int cap = (kSplitPages - 1) * pageSize;  // a slice may start mid-page: one page more than its keys fill
    return min(min(cap, kMaxSliceKeys), max(kMinSplitKeys, (span + splits - 1) / splits));
}

// Launch geometry of one instantiation. A lane owns EPL consecutive elements of a head; LPT lanes cover one
// token's head; a warp covers TPW tokens side by side and each lane walks U of them per step.
template <typename T, int D, int GH>
struct DecodeShape {
    static constexpr int VEC = 16 / sizeof(T);              // elements per 16-byte copy
    static constexpr int EPL = D / 32 > VEC ? D / 32 : VEC;  // elements per lane
    static constexpr int CHUNKS = EPL / VEC;                // 16-byte copies per lane per K or V row
    static constexpr int LPT = D / EPL;
    static constexpr int TPW = 32 / LPT;
    static constexpr int SLOTS = kDecodeWarps * TPW;  // independent softmax states per block
    static constexpr int U = GH >= 8 ? 2 : 4;         // fewer tokens per step where q and acc take more registers
    // Per warp and stage: [U][K|V][CHUNKS][32 lanes][16 bytes], so a warp's copies hit consecutive banks.
    static constexpr int WARP_STAGE_BYTES = U * 2 * CHUNKS * 32 * 16;
    static constexpr int STAGES = WARP_STAGE_BYTES * kDecodeWarps * 2 <= 32 * 1024 ? 2 : 1;
    static constexpr int STAGING_BYTES = WARP_STAGE_BYTES * kDecodeWarps * STAGES;
    static constexpr int COMBINE_BYTES = (SLOTS * GH * (D + 3) + GH) * 4;
    static constexpr int SMEM_BYTES = STAGING_BYTES > COMBINE_BYTES ? STAGING_BYTES : COMBINE_BYTES;
    static_assert(D % EPL == 0 && LPT <= 32 && 32 % LPT == 0 && EPL % VEC == 0, "head dim must split across a warp");
};

// EPL elements of one (token, K|V) row of a lane's staged copy, widened to fp32.
template <typename T, int EPL, int CHUNKS>
__device__ __forceinline__ void load_staged(const unsigned char* row, int lane, float (&dst)[EPL]) {
    constexpr int VEC = EPL / CHUNKS;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        float part[VEC];
        load_row<VEC>(reinterpret_cast<const T*>(row + (c * 32 + lane) * 16), part);
#pragma unroll
        for (int e = 0; e < VEC; ++e) dst[c * VEC + e] = part[e];
    }
}

// K and V are staged through shared memory with cp.async, STAGES deep per warp: the copies of the next step
// are in flight while this step computes. Each lane copies exactly the bytes it later reads, so a lane's own
// wait_group orders them and no barrier is needed inside the loop. The page ids of a slice's keys are read
// once into shared memory.
template <typename T, int D, int GH>
__device__ __forceinline__ void decode_body(const T* q, PagedKv kv, Mask mask, const int* qoIndptr, int qoHeads,
                                            float smScale, int splits, int sliceStride, T* out, float* partialO,
                                            float* partialLse, int* splitDone) {
    using S = DecodeShape<T, D, GH>;
    constexpr int EPL = S::EPL, CHUNKS = S::CHUNKS, LPT = S::LPT, TPW = S::TPW, SLOTS = S::SLOTS, U = S::U;
    constexpr int STAGES = S::STAGES;

    __shared__ __align__(16) unsigned char smem[S::SMEM_BYTES];
    __shared__ long long pageBase[kSplitPages];  // element offset of each K page of the slice in the pool
    __shared__ int lastBlock;

    const int r = blockIdx.z;
    const int stride = gridDim.x;  // blocks per (group, sequence): block x walks slices x, x + stride, ...
    const int group = qoHeads / kv.kvHeads;
    const int blocksPerKvHead = group / GH;
    const int g = blockIdx.y / blocksPerKvHead;
    const int h0 = g * group + (blockIdx.y % blocksPerKvHead) * GH;
    const int qBegin = qoIndptr[r], qLen = qoIndptr[r + 1] - qBegin;
    if (qLen <= 0) return;

    const int kvLen = kv.length(r);
    int lo, hi;
    mask.visible(kvLen, qLen, kvLen - qLen, lo, hi);
    const int keys = slice_keys(hi - lo, splits, kv.pageSize);
    const int slices = max(1, (hi - lo + keys - 1) / keys);
    if (blockIdx.x >= slices) return;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int slotInWarp = lane / LPT, sub = lane % LPT;
    const int slot = warp * TPW + slotInWarp;

    float qf[GH][EPL];
#pragma unroll
    for (int j = 0; j < GH; ++j) {
        load_row<EPL>(q + ((long long)qBegin * qoHeads + h0 + j) * D + sub * EPL, qf[j]);
#pragma unroll
        for (int e = 0; e < EPL; ++e) qf[j][e] *= smScale * kLog2e;
    }
    const long long pageElems = (long long)kv.pageSize * kv.kvHeads * D;  // one K or V block of a page
    const T* pool = static_cast<const T*>(kv.pool);
    const int laneOffset = g * D + sub * EPL;  // within a token's row of heads
    unsigned char* warpStaging = smem + warp * STAGES * S::WARP_STAGE_BYTES;
    float* smM = reinterpret_cast<float*>(smem);  // [SLOTS][GH]
    float* smL = smM + SLOTS * GH;                // [SLOTS][GH]
    float* smW = smL + SLOTS * GH;                // [SLOTS][GH]
    float* smTotal = smW + SLOTS * GH;            // [GH]
    float* smAcc = smTotal + GH;                  // [SLOTS][GH][D]

    for (int split = blockIdx.x; split < slices; split += stride) {
        const int kBegin = lo + split * keys;
        const int kEnd = min(hi, kBegin + keys);
        const int firstPage = kBegin / kv.pageSize;
        __syncthreads();  // the previous slice's combine is done with the shared memory
        if (kBegin < kEnd) {
            const int pages = (kEnd - 1) / kv.pageSize - firstPage + 1;
            const int* ids = kv.kvIndices + kv.kvIndptr[r] + firstPage;
            for (int i = threadIdx.x; i < pages; i += blockDim.x) {
                pageBase[i] = ((long long)kv.layer * kv.numPages + ids[i]) * 2 * pageElems;
            }
        }
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
            unsigned char* stage = warpStaging + (step % STAGES) * S::WARP_STAGE_BYTES;
            const int t0 = warpFirst + step * SLOTS * U + slotInWarp * U;
            // One division per step: the U tokens are consecutive, so later ones just walk the page.
            int page = t0 / kv.pageSize;
            int slotInPage = t0 - page * kv.pageSize;
            page -= firstPage;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int t = t0 + u;
                const bool valid = t < kEnd;
                const T* k = pool;
                if (valid) {
                    k = pool + pageBase[page] + slotInPage * kv.kvHeads * D + laneOffset;
                }
                if (++slotInPage == kv.pageSize) {
                    slotInPage = 0;
                    ++page;
                }
#pragma unroll
                for (int c = 0; c < CHUNKS; ++c) {
                    cp_async16(stage + (((u * 2 + 0) * CHUNKS + c) * 32 + lane) * 16, k + c * S::VEC, valid);
                    cp_async16(stage + (((u * 2 + 1) * CHUNKS + c) * 32 + lane) * 16,
                               valid ? k + pageElems + c * S::VEC : k, valid);
                }
            }
            cp_async_commit();
        };

#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < steps) issue(s);
        }
        for (int step = 0; step < steps; ++step) {
            if (step + STAGES - 1 < steps) {
                issue(step + STAGES - 1);
            } else {
                cp_async_commit();  // an empty group keeps "all but the newest STAGES-1" meaning this step
            }
            cp_async_wait<STAGES - 1>();
            const unsigned char* stage = warpStaging + (step % STAGES) * S::WARP_STAGE_BYTES;
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
            // Online softmax: rescale once per step, then turn the scores into weights.
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
        __syncthreads();  // the combine below reuses the staging memory

#pragma unroll
        for (int j = 0; j < GH; ++j) {
#pragma unroll
            for (int e = 0; e < EPL; ++e) smAcc[(slot * GH + j) * D + sub * EPL + e] = acc[j][e];
            if (sub == 0) {
                smM[slot * GH + j] = m[j];
                smL[slot * GH + j] = l[j];
            }
        }
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
        for (int idx = threadIdx.x; idx < GH * D; idx += blockDim.x) {
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
    if (slices == 1) return;

    // The block that completes the sequence's last slice merges:
    // out = sum_s 2^(lse_s - M) o_s / sum_s 2^(lse_s - M).
    __threadfence();  // this block's partials are visible device-wide before it is counted
    __syncthreads();
    if (threadIdx.x == 0) {
        const int mine = (slices - 1 - blockIdx.x) / stride + 1;
        int* done = splitDone + (long long)r * gridDim.y + blockIdx.y;
        lastBlock = atomicAdd(done, mine) + mine == slices;
        if (lastBlock) *done = 0;  // every other block has counted: ready for the next launch
    }
    __syncthreads();
    if (!lastBlock) return;
    __threadfence();
    float* mergeMax = smM;         // [GH]
    float* mergeTotal = smM + GH;  // [GH]
    for (int j = warp; j < GH; j += kDecodeWarps) {
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
    // Four consecutive elements per thread; the slice loop is unrolled so that many partial reads from L2
    // are in flight at once.
    constexpr int D4 = D / 4;
    for (int idx = threadIdx.x; idx < GH * D4; idx += blockDim.x) {
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

}  // namespace

// Up to four query heads per block, registers are capped at what lets four blocks share an SM (128 per
// thread; the compiler would otherwise take ~167 for the slice loop and fit three); eight heads need more.
#define MSTAR_DECODE(NAME, T, D, GH)                                                                            \
    extern "C" __global__ void __launch_bounds__(kDecodeWarps * 32, GH <= 4 ? 4 : 1)                            \
        NAME(const T* q, const void* pool, const int* qoIndptr, const int* kvIndptr, const int* kvIndices,     \
             const int* lastPageLen, int layer, int numPages, int pageSize, int qoHeads, int kvHeads, int causal, \
             int windowLeft, int contextOnly, float smScale, int splits, int sliceStride, T* out,              \
             float* partialO, float* partialLse, int* splitDone) {                                             \
        decode_body<T, D, GH>(q, PagedKv{pool, kvIndptr, kvIndices, lastPageLen, layer, numPages, pageSize, kvHeads}, \
                              Mask{causal, windowLeft, contextOnly}, qoIndptr, qoHeads, smScale, splits, sliceStride, \
                              out, partialO, partialLse, splitDone);                                           \
    }

#define MSTAR_DECODE_GROUPS(TN, T, D)           \
    MSTAR_DECODE(attn_decode_##TN##_d##D##_g1, T, D, 1) \
    MSTAR_DECODE(attn_decode_##TN##_d##D##_g2, T, D, 2) \
    MSTAR_DECODE(attn_decode_##TN##_d##D##_g4, T, D, 4) \
    MSTAR_DECODE(attn_decode_##TN##_d##D##_g8, T, D, 8)

MSTAR_DECODE_GROUPS(f32, float, 32)
MSTAR_DECODE_GROUPS(f32, float, 64)
MSTAR_DECODE_GROUPS(f32, float, 128)
MSTAR_DECODE_GROUPS(f32, float, 256)
MSTAR_DECODE_GROUPS(bf16, __nv_bfloat16, 32)
MSTAR_DECODE_GROUPS(bf16, __nv_bfloat16, 64)
MSTAR_DECODE_GROUPS(bf16, __nv_bfloat16, 128)
MSTAR_DECODE_GROUPS(bf16, __nv_bfloat16, 256)
