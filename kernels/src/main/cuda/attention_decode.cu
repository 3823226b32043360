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

template <typename T, int D, int GH>
__device__ __forceinline__ void decode_body(const T* q, PagedKv kv, Mask mask, const int* qoIndptr, int qoHeads,
                                            float smScale, int keysPerSplit, int numSplits, T* out,
                                            float* partialO, float* partialLse) {
    constexpr int VEC = 16 / sizeof(T);
    constexpr int EPL = D / 32 > VEC ? D / 32 : VEC;  // elements per lane
    constexpr int LPT = D / EPL;                      // lanes per token
    constexpr int TPW = 32 / LPT;                     // tokens side by side in a warp
    constexpr int SLOTS = kDecodeWarps * TPW;         // independent softmax states per block
    constexpr int U = GH >= 8 ? 2 : 4;                // tokens per slot per step: loads in flight vs registers
    static_assert(D % EPL == 0 && LPT <= 32 && 32 % LPT == 0, "head dim must split evenly across a warp");

    __shared__ float smM[SLOTS][GH];
    __shared__ float smL[SLOTS][GH];
    __shared__ float smAcc[SLOTS][GH][D];
    __shared__ float smW[SLOTS][GH];
    __shared__ float smTotal[GH];

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
    const int kBegin = lo + split * keysPerSplit;
    const int kEnd = min(hi, kBegin + keysPerSplit);

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
    float m[GH], l[GH], acc[GH][EPL];
#pragma unroll
    for (int j = 0; j < GH; ++j) {
        m[j] = -INFINITY;
        l[j] = 0.f;
#pragma unroll
        for (int e = 0; e < EPL; ++e) acc[j][e] = 0.f;
    }

    const T* pool = static_cast<const T*>(kv.pool);
    // The trip count depends only on the warp, so every lane reaches the shuffles below.
    for (int tw = kBegin + warp * TPW * U; tw < kEnd; tw += SLOTS * U) {
        const int t0 = tw + slotInWarp * U;
        float kf[U][EPL], vf[U][EPL];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (t0 + u < kEnd) {
                const long long off = kv.offset(r, t0 + u, 0, g, D) + sub * EPL;
                const long long voff = off + (long long)kv.pageSize * kv.kvHeads * D;
                load_row<EPL>(pool + off, kf[u]);
                load_row<EPL>(pool + voff, vf[u]);
            } else {
#pragma unroll
                for (int e = 0; e < EPL; ++e) kf[u][e] = vf[u][e] = 0.f;
            }
        }
#pragma unroll
        for (int j = 0; j < GH; ++j) {
            float s[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                float d = 0.f;
#pragma unroll
                for (int e = 0; e < EPL; ++e) d += qf[j][e] * kf[u][e];
#pragma unroll
                for (int o = LPT / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
                s[u] = t0 + u < kEnd ? d : -INFINITY;
            }
            float mx = s[0];
#pragma unroll
            for (int u = 1; u < U; ++u) mx = fmaxf(mx, s[u]);
            const float mNew = fmaxf(m[j], mx);
            if (mNew == -INFINITY) continue;  // this slot has no keys in this step
            const float alpha = exp2f(m[j] - mNew);
            l[j] *= alpha;
#pragma unroll
            for (int e = 0; e < EPL; ++e) acc[j][e] *= alpha;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const float pu = exp2f(s[u] - mNew);
                l[j] += pu;
#pragma unroll
                for (int e = 0; e < EPL; ++e) acc[j][e] += pu * vf[u][e];
            }
            m[j] = mNew;
        }
    }

#pragma unroll
    for (int j = 0; j < GH; ++j) {
#pragma unroll
        for (int e = 0; e < EPL; ++e) smAcc[slot][j][sub * EPL + e] = acc[j][e];
        if (sub == 0) {
            smM[slot][j] = m[j];
            smL[slot][j] = l[j];
        }
    }
    __syncthreads();
    if (threadIdx.x < GH) {
        const int j = threadIdx.x;
        float mAll = -INFINITY;
        for (int s = 0; s < SLOTS; ++s) mAll = fmaxf(mAll, smM[s][j]);
        float total = 0.f;
        for (int s = 0; s < SLOTS; ++s) {
            const float w = mAll == -INFINITY ? 0.f : exp2f(smM[s][j] - mAll);
            smW[s][j] = w;
            total += w * smL[s][j];
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
        for (int s = 0; s < SLOTS; ++s) o += smW[s][j] * smAcc[s][j][d];
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
             int windowLeft, int contextOnly, float smScale, int keysPerSplit, int numSplits, T* out,          \
             float* partialO, float* partialLse) {                                                             \
        decode_body<T, D, GH>(q, PagedKv{pool, kvIndptr, kvIndices, lastPageLen, layer, numPages, pageSize, kvHeads}, \
                              Mask{causal, windowLeft, contextOnly}, qoIndptr, qoHeads, smScale, keysPerSplit,    \
                              numSplits, out, partialO, partialLse);                                           \
    }

#define MSTAR_DECODE_GROUPS(TN, T, D)           \
    MSTAR_DECODE(attn_decode_##TN##_d##D##_g1, T, D, 1) \
    MSTAR_DECODE(attn_decode_##TN##_d##D##_g2, T, D, 2) \
    MSTAR_DECODE(attn_decode_##TN##_d##D##_g4, T, D, 4) \
    MSTAR_DECODE(attn_decode_##TN##_d##D##_g8, T, D, 8)

MSTAR_DECODE_GROUPS(f32, float, 64)
MSTAR_DECODE_GROUPS(f32, float, 128)
MSTAR_DECODE_GROUPS(f32, float, 256)
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
