// Rotary position embedding, in place on q and k.
#include "common.cuh"
#include "rotary.cuh"
#include "vec8.cuh"

using namespace mstar;

// One block per token. invFreq holds rotaryDim/2 fp32 factors built on the host from RopeParams.invFreq in
// double and rounded once, so every device agrees on the table; the angle is pos * invFreq in fp32.
// NeoX pairs (i, i + rotaryDim/2); interleaved (GPT-J) pairs (2i, 2i + 1). Dims past rotaryDim pass through.
__device__ __forceinline__ void rotate_heads(void* t, int dt, long long tokenBase, int heads, int headDim,
                                             int rotaryDim, int interleave, float pos, const float* invFreq) {
    const int half = rotaryDim / 2;
    for (int w = threadIdx.x; w < heads * half; w += blockDim.x) {
        const int h = w / half, i = w - h * half;
        const long long head = tokenBase + (long long)h * headDim;
        const long long i1 = head + (interleave ? 2 * i : i);
        const long long i2 = head + (interleave ? 2 * i + 1 : i + half);
        float s, c;
        sincosf(pos * invFreq[i], &s, &c);
        const float x1 = load_f(t, dt, i1), x2 = load_f(t, dt, i2);
        store_f(t, dt, i1, rope_rotate(x1, x2, c, s, true));
        store_f(t, dt, i2, rope_rotate(x1, x2, c, s, false));
    }
}

extern "C" __global__ void rope_inplace(void* q, int qDt, void* k, int kDt, const int* posIds, const float* invFreq,
                                        int qHeads, int kHeads, int headDim, int rotaryDim, int interleave) {
    mstar::await_previous_kernel();
    const long long tok = blockIdx.x;
    const float pos = (float)posIds[tok];
    rotate_heads(q, qDt, tok * qHeads * headDim, qHeads, headDim, rotaryDim, interleave, pos, invFreq);
    if (k != nullptr) rotate_heads(k, kDt, tok * kHeads * headDim, kHeads, headDim, rotaryDim, interleave, pos, invFreq);
}

// Longest rotary span qkv_rope_append's bf16 path takes (its angle table is in shared memory): head dim 256.
constexpr int kMaxRotaryDim = 256;

// Elements e .. e + 7 of a head rotated: own holds them, partner (NeoX) the eight half a rotary span away, the angles
// of the token's pair indices in sinT / cosT. Elements at or past rotaryDim pass through.
__device__ __forceinline__ void rotate8(const float (&own)[8], const float (&partner)[8], int e, int rotaryDim,
                                        int interleave, const float* sinT, const float* cosT, float (&r)[8]) {
    const int half = rotaryDim / 2;
    const bool low = interleave || e < half;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        if (e >= rotaryDim) {
            r[j] = own[j];
            continue;
        }
        // x1 is the pair's first element, x2 its second; this thread writes element e + j
        const bool first = interleave ? (j % 2 == 0) : low;
        const int i = interleave ? e / 2 + j / 2 : (low ? e : e - half) + j;
        const float x1 = interleave ? own[j & ~1] : (low ? own[j] : partner[j]);
        const float x2 = interleave ? own[j | 1] : (low ? partner[j] : own[j]);
        r[j] = rope_rotate(x1, x2, cosT[i], sinT[i], first);
    }
}

// qkv_rope_append's bf16 path: each thread writes 8 consecutive elements of one head of q, k or v with a 16-byte
// store, from one 16-byte load of its own elements and, for a NeoX rotation, one of their partners half a rotary
// span away (read by the partner's thread too, from L1). The token's angles are computed once into shared
// memory, not once per head. Per element the arithmetic is the general path's: with every tensor bf16, rounding
// to the q and qkv dtypes before the pool's is the one bf16 rounding.
__device__ __forceinline__ void qkv_rope_append_bf16(const uint4* qkv, const float* invFreq, float pos, uint4* q,
                                                     uint4* pool, long long kOut, long long vOut, int qHeads,
                                                     int kvHeads, int headDim, int rotaryDim, int interleave) {
    const int headVecs = headDim / 8;
    const int half = rotaryDim / 2;
    const int vecs = (qHeads + 2 * kvHeads) * headVecs;
    const long long in = (long long)blockIdx.x * vecs;
    const long long qOut = (long long)blockIdx.x * qHeads * headVecs;
    __shared__ float sinT[kMaxRotaryDim / 2], cosT[kMaxRotaryDim / 2];
    for (int i = threadIdx.x; i < half; i += blockDim.x) sincosf(pos * invFreq[i], &sinT[i], &cosT[i]);
    __syncthreads();
    for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
        const int h = v / headVecs, e = (v - h * headVecs) * 8;
        uint4 res = qkv[in + v];
        if (h < qHeads + kvHeads && e < rotaryDim) {
            const __nv_bfloat16* elements = reinterpret_cast<const __nv_bfloat16*>(qkv);
            const bool low = interleave || e < half;
            float a[8], p[8], r[8];
            load8(elements, in + v, a);
            if (!interleave) load8(elements, in + v + (low ? half : -half) / 8, p);
            rotate8(a, p, e, rotaryDim, interleave, sinT, cosT, r);
            store8(reinterpret_cast<__nv_bfloat16*>(&res), 0, r);
        }
        if (h < qHeads) {
            q[qOut + v] = res;
        } else if (h < qHeads + kvHeads) {
            pool[kOut / 8 + (v - qHeads * headVecs)] = res;
        } else {
            pool[vOut / 8 + (v - (qHeads + kvHeads) * headVecs)] = res;
        }
    }
}

// splitQkv → rope_inplace → kv_append of one layer in one pass; one block per token. Matches the unfused
// sequence bit for bit: q is rounded to its dtype before rotating (as the split stores it), rotated k is
// rounded to qkv's dtype (the unfused k buffer) before the pool's, and v is copied. Dims past rotaryDim
// pass through. releaseAttention: the next kernel (decode attention) may start before this one ends.
extern "C" __global__ void qkv_rope_append(const void* qkv, int inDt, const int* posIds, const float* invFreq,
                                           void* q, int qDt, void* pool, int poolDt, const int* pageIdx,
                                           const int* offsets, int layer, int numPages, int pageSize, int qHeads,
                                           int kvHeads, int headDim, int rotaryDim, int interleave,
                                           int releaseAttention) {
    mstar::await_previous_kernel();
    if (releaseAttention) mstar::release_dependents();
    const long long tok = blockIdx.x;
    const float pos = (float)posIds[tok];
    const long long in = tok * (long long)(qHeads + 2 * kvHeads) * headDim;
    const long long qOut = tok * (long long)qHeads * headDim;
    const int tokenElems = kvHeads * headDim;
    const long long kOut = pool_slot(layer, numPages, pageIdx[tok], 0, pageSize, offsets[tok], tokenElems);
    const long long vOut = pool_slot(layer, numPages, pageIdx[tok], 1, pageSize, offsets[tok], tokenElems);
    const bool aligned = ((reinterpret_cast<uintptr_t>(qkv) | reinterpret_cast<uintptr_t>(q)
                           | reinterpret_cast<uintptr_t>(pool)) & 15) == 0;
    if (inDt == DT_BF16 && qDt == DT_BF16 && poolDt == DT_BF16 && headDim % 8 == 0 && rotaryDim % 16 == 0
        && rotaryDim <= kMaxRotaryDim && aligned) {
        qkv_rope_append_bf16(static_cast<const uint4*>(qkv), invFreq, pos, static_cast<uint4*>(q),
                             static_cast<uint4*>(pool), kOut, vOut, qHeads, kvHeads, headDim, rotaryDim, interleave);
        return;
    }
    const int half = rotaryDim / 2;
    // heads 0..qHeads-1 are q, the next kvHeads are k (contiguous in qkv)
    for (int w = threadIdx.x; w < (qHeads + kvHeads) * half; w += blockDim.x) {
        const int h = w / half, i = w - h * half;
        const int c1 = interleave ? 2 * i : i;
        const int c2 = interleave ? 2 * i + 1 : i + half;
        const long long src = in + (long long)h * headDim;
        float s, c;
        sincosf(pos * invFreq[i], &s, &c);
        if (h < qHeads) {
            const float x1 = round_to(qDt, load_f(qkv, inDt, src + c1));
            const float x2 = round_to(qDt, load_f(qkv, inDt, src + c2));
            const long long dst = qOut + (long long)h * headDim;
            store_f(q, qDt, dst + c1, rope_rotate(x1, x2, c, s, true));
            store_f(q, qDt, dst + c2, rope_rotate(x1, x2, c, s, false));
        } else {
            const float x1 = load_f(qkv, inDt, src + c1), x2 = load_f(qkv, inDt, src + c2);
            const long long dst = kOut + (long long)(h - qHeads) * headDim;
            store_f(pool, poolDt, dst + c1, round_to(inDt, rope_rotate(x1, x2, c, s, true)));
            store_f(pool, poolDt, dst + c2, round_to(inDt, rope_rotate(x1, x2, c, s, false)));
        }
    }
    const int pass = headDim - rotaryDim;
    for (int w = threadIdx.x; w < (qHeads + kvHeads) * pass; w += blockDim.x) {
        const int h = w / pass, e = rotaryDim + (w - h * pass);
        const float x = load_f(qkv, inDt, in + (long long)h * headDim + e);
        if (h < qHeads) {
            store_f(q, qDt, qOut + (long long)h * headDim + e, x);
        } else {
            store_f(pool, poolDt, kOut + (long long)(h - qHeads) * headDim + e, x);
        }
    }
    for (int e = threadIdx.x; e < tokenElems; e += blockDim.x) {
        store_f(pool, poolDt, vOut + e, load_f(qkv, inDt, in + (long long)(qHeads + kvHeads) * headDim + e));
    }
}

// splitQkv → RMSNorm of each q and k head (Qwen3's and Gemma 3's q_norm, k_norm: one weight of headDim) → rope_inplace
// → kv_append of one layer in one pass, bf16 throughout; one block per token, a warp per q or k head, lane l holding
// the head's elements 8l .. 8l + 7 (headDim at most 256). Matches the unfused sequence bit for bit: the sum of squares
// is rms_norm's (a lane's eight squares in order, then the warp's butterfly; rms_norm's second stage over one warp adds
// zeros), the normalised head is rounded to bf16 as rms_norm stores it, and each RoPE pair is rotated from those bf16
// values as rope_inplace does (a NeoX partner half a rotary span away is in the lane rotaryDim / 16 over). v is
// copied. The launcher takes this path for rotaryDim a multiple of 16; dims past rotaryDim pass through normalised.
constexpr int kQkHeadsInFlight = 4;

extern "C" __global__ void qk_norm_rope_append(const __nv_bfloat16* qkv, const __nv_bfloat16* qNorm,
                                               const __nv_bfloat16* kNorm, float eps, const int* posIds,
                                               const float* invFreq, __nv_bfloat16* q, __nv_bfloat16* pool,
                                               const int* pageIdx, const int* offsets, int layer, int numPages,
                                               int pageSize, int qHeads, int kvHeads, int headDim, int rotaryDim,
                                               int interleave, int releaseAttention) {
    mstar::await_previous_kernel();
    if (releaseAttention) mstar::release_dependents();
    const long long tok = blockIdx.x;
    const float pos = (float)posIds[tok];
    const int headVecs = headDim / 8, half = rotaryDim / 2;
    const int tokenVecs = kvHeads * headVecs;
    const long long in = tok * (long long)(qHeads + 2 * kvHeads) * headVecs;
    const long long kOut = pool_slot(layer, numPages, pageIdx[tok], 0, pageSize, offsets[tok], tokenVecs * 8) / 8;
    const long long vOut = pool_slot(layer, numPages, pageIdx[tok], 1, pageSize, offsets[tok], tokenVecs * 8) / 8;
    __shared__ float sinT[kMaxRotaryDim / 2], cosT[kMaxRotaryDim / 2];
    for (int i = threadIdx.x; i < half; i += blockDim.x) sincosf(pos * invFreq[i], &sinT[i], &cosT[i]);
    __syncthreads();
    const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    const int e = 8 * lane;
    const bool live = lane < headVecs;
    // the lane holding this lane's NeoX partners (any lane where there are none: every lane takes part in a shuffle)
    const int partner = interleave || e >= rotaryDim ? lane : e < half ? lane + half / 8 : lane - half / 8;
    // the norms' weights once; a warp's heads kQkHeadsInFlight at a time, their loads issued before the first is
    // normalised (one head after another, each waited for its load)
    float wq[8] = {}, wk[8] = {};
    if (live) {
        load8(qNorm, lane, wq);
        load8(kNorm, lane, wk);
    }
    const int heads = qHeads + kvHeads;
    for (int h0 = threadIdx.x >> 5; h0 < heads; h0 += warps * kQkHeadsInFlight) {
        float a[kQkHeadsInFlight][8] = {};
#pragma unroll
        for (int b = 0; b < kQkHeadsInFlight; ++b) {
            const int h = h0 + b * warps;
            if (live && h < heads) load8(qkv, in + (long long)h * headVecs + lane, a[b]);
        }
#pragma unroll
        for (int b = 0; b < kQkHeadsInFlight; ++b) {
            const int h = h0 + b * warps;
            if (h >= heads) break;  // the same for the whole warp
            const bool isQ = h < qHeads;
            float ss = 0.f;
#pragma unroll
            for (int j = 0; j < 8; ++j) ss += a[b][j] * a[b][j];
            ss = warp_sum(ss);
            const float inv = (float)(1.0 / sqrt((double)(ss / (float)headDim + eps)));
            float n[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                n[j] = __bfloat162float(__float2bfloat16_rn(a[b][j] * inv * (isQ ? wq[j] : wk[j])));
            }
            float p[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) p[j] = __shfl_sync(0xffffffffu, n[j], partner);
            float r[8];
            rotate8(n, p, e, rotaryDim, interleave, sinT, cosT, r);
            if (live) {
                if (isQ) {
                    store8(q, (tok * qHeads + h) * headVecs + lane, r);
                } else {
                    store8(pool, kOut + (long long)(h - qHeads) * headVecs + lane, r);
                }
            }
        }
    }
    const uint4* v = reinterpret_cast<const uint4*>(qkv) + in + (long long)(qHeads + kvHeads) * headVecs;
    for (int i = threadIdx.x; i < tokenVecs; i += blockDim.x) reinterpret_cast<uint4*>(pool)[vOut + i] = v[i];
}
