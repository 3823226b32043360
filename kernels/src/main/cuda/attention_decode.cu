// Paged decode attention (one query per sequence), split-KV: block (split, head group, sequence) runs an
// online softmax over its slice of the visible keys for GH query heads that share one KV head, so each K/V
// row is read once for the whole group. With one split the block writes the output; otherwise it writes a
// normalised partial and its log2-sum-exp, merged by attn_decode_merge. Slices have a fixed number of keys,
// so how a sequence is cut, and so its result bit for bit, does not depend on the rest of the batch; a
// slice past the end of a shorter sequence writes an empty partial (zeros, lse -inf) that merges exactly.
#include "attention.cuh"

using namespace mstar;

namespace {

constexpr int kDecodeWarps = 4;
// Keys per split; CudaAttention.KEYS_PER_SPLIT must equal it.
constexpr int kKeysPerSplit = 256;

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
// wait_group orders them and no barrier is needed inside the loop. The page ids of the block's keys are read
// once into shared memory.
template <typename T, int D, int GH>
__device__ __forceinline__ void decode_body(const T* q, PagedKv kv, Mask mask, const int* qoIndptr, int qoHeads,
                                            float smScale, int numSplits, T* out, float* partialO,
                                            float* partialLse) {
    using S = DecodeShape<T, D, GH>;
    constexpr int EPL = S::EPL, CHUNKS = S::CHUNKS, LPT = S::LPT, TPW = S::TPW, SLOTS = S::SLOTS, U = S::U;
    constexpr int STAGES = S::STAGES;

    __shared__ __align__(16) unsigned char smem[S::SMEM_BYTES];
    __shared__ long long pageBase[kKeysPerSplit + 2];  // element offset of each K page of the split in the pool

    const int r = blockIdx.z, split = blockIdx.x;
    const int group = qoHeads / kv.kvHeads;
    const int blocksPerKvHead = group / GH;
    const int g = blockIdx.y / blocksPerKvHead;
    const int h0 = g * group + (blockIdx.y % blocksPerKvHead) * GH;
    const int qBegin = qoIndptr[r], qLen = qoIndptr[r + 1] - qBegin;
    if (qLen <= 0) return;

    const int kvLen = kv.length(r);
    int lo, hi;
    mask.visible(kvLen, qLen, kvLen - qLen, lo, hi);
    const int kBegin = lo + split * kKeysPerSplit;
    const int kEnd = min(hi, kBegin + kKeysPerSplit);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int slotInWarp = lane / LPT, sub = lane % LPT;
    const int slot = warp * TPW + slotInWarp;

    // q first: its loads overlap the page-table reads below.
    float qf[GH][EPL];
#pragma unroll
    for (int j = 0; j < GH; ++j) {
        load_row<EPL>(q + ((long long)qBegin * qoHeads + h0 + j) * D + sub * EPL, qf[j]);
#pragma unroll
        for (int e = 0; e < EPL; ++e) qf[j][e] *= smScale * kLog2e;
    }
    const long long pageElems = (long long)kv.pageSize * kv.kvHeads * D;  // one K or V block of a page
    const int firstPage = kBegin / kv.pageSize;
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

    const T* pool = static_cast<const T*>(kv.pool);
    const int laneOffset = g * D + sub * EPL;  // within a token's row of heads
    const int warpFirst = kBegin + warp * TPW * U;
    const int steps = warpFirst < kEnd ? (kEnd - warpFirst + SLOTS * U - 1) / (SLOTS * U) : 0;
    unsigned char* warpStaging = smem + warp * STAGES * S::WARP_STAGE_BYTES;

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
                cp_async16(stage + (((u * 2 + 1) * CHUNKS + c) * 32 + lane) * 16, valid ? k + pageElems + c * S::VEC : k,
                           valid);
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

    float* smM = reinterpret_cast<float*>(smem);  // [SLOTS][GH]
    float* smL = smM + SLOTS * GH;                // [SLOTS][GH]
    float* smW = smL + SLOTS * GH;                // [SLOTS][GH]
    float* smTotal = smW + SLOTS * GH;            // [GH]
    float* smAcc = smTotal + GH;                  // [SLOTS][GH][D]
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
        if (numSplits > 1) {
            partialLse[((long long)r * qoHeads + h0 + j) * numSplits + split] =
                total > 0.f ? mAll + log2f(total) : -INFINITY;
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < GH * D; idx += blockDim.x) {
        const int j = idx / D, d = idx - j * D;
        float o = 0.f;
        for (int s = 0; s < SLOTS; ++s) o += smW[s * GH + j] * smAcc[(s * GH + j) * D + d];
        const float v = smTotal[j] > 0.f ? o / smTotal[j] : 0.f;
        if (numSplits == 1) {
            store_elem<T>(out, ((long long)qBegin * qoHeads + h0 + j) * D + d, v);
        } else {
            partialO[(((long long)r * qoHeads + h0 + j) * numSplits + split) * D + d] = v;
        }
    }
}

}  // namespace

#define MSTAR_DECODE(NAME, T, D, GH)                                                                            \
    extern "C" __global__ void __launch_bounds__(kDecodeWarps * 32)                                             \
        NAME(const T* q, const void* pool, const int* qoIndptr, const int* kvIndptr, const int* kvIndices,     \
             const int* lastPageLen, int layer, int numPages, int pageSize, int qoHeads, int kvHeads, int causal, \
             int windowLeft, int contextOnly, float smScale, int numSplits, T* out, float* partialO,           \
             float* partialLse) {                                                                              \
        decode_body<T, D, GH>(q, PagedKv{pool, kvIndptr, kvIndices, lastPageLen, layer, numPages, pageSize, kvHeads}, \
                              Mask{causal, windowLeft, contextOnly}, qoIndptr, qoHeads, smScale, numSplits, out,  \
                              partialO, partialLse);                                                           \
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

// Merges the splits of one (sequence, query head): out = sum_s 2^(lse_s - M) o_s / sum_s 2^(lse_s - M).
#define MSTAR_DECODE_MERGE(NAME, T)                                                                          \
    extern "C" __global__ void NAME(const float* partialO, const float* partialLse, const int* qoIndptr,     \
                                    int qoHeads, int headDim, int numSplits, T* out) {                      \
        const int r = blockIdx.x, h = blockIdx.y;                                                            \
        const int qBegin = qoIndptr[r];                                                                      \
        if (qoIndptr[r + 1] - qBegin <= 0) return;                                                           \
        const long long head = (long long)r * qoHeads + h;                                                   \
        const float* lse = partialLse + head * numSplits;                                                    \
        float mAll = -INFINITY;                                                                              \
        for (int s = 0; s < numSplits; ++s) mAll = fmaxf(mAll, lse[s]);                                      \
        float total = 0.f;                                                                                   \
        if (mAll != -INFINITY)                                                                               \
            for (int s = 0; s < numSplits; ++s) total += exp2f(lse[s] - mAll);                               \
        for (int d = threadIdx.x; d < headDim; d += blockDim.x) {                                            \
            float o = 0.f;                                                                                   \
            if (total > 0.f)                                                                                 \
                for (int s = 0; s < numSplits; ++s)                                                          \
                    o += exp2f(lse[s] - mAll) * partialO[(head * numSplits + s) * headDim + d];              \
            store_elem<T>(out, ((long long)qBegin * qoHeads + h) * headDim + d, total > 0.f ? o / total : 0.f); \
        }                                                                                                    \
    }

MSTAR_DECODE_MERGE(attn_decode_merge_f32, float)
MSTAR_DECODE_MERGE(attn_decode_merge_bf16, __nv_bfloat16)
