// Rotary position embedding, in place on q and k.
#include "common.cuh"

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
        store_f(t, dt, i1, x1 * c - x2 * s);
        store_f(t, dt, i2, x2 * c + x1 * s);
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

// splitQkv → rope_inplace → kv_append of one layer in one pass; one block per token. Matches the unfused
// sequence bit for bit: q is rounded to its dtype before rotating (as the split stores it), rotated k is
// rounded to qkv's dtype (the unfused k buffer) before the pool's, and v is copied. Dims past rotaryDim
// pass through.
extern "C" __global__ void qkv_rope_append(const void* qkv, int inDt, const int* posIds, const float* invFreq,
                                           void* q, int qDt, void* pool, int poolDt, const int* pageIdx,
                                           const int* offsets, int layer, int numPages, int pageSize, int qHeads,
                                           int kvHeads, int headDim, int rotaryDim, int interleave) {
    mstar::await_previous_kernel();
    const long long tok = blockIdx.x;
    const float pos = (float)posIds[tok];
    const long long in = tok * (long long)(qHeads + 2 * kvHeads) * headDim;
    const long long qOut = tok * (long long)qHeads * headDim;
    const int tokenElems = kvHeads * headDim;
    const long long page = (long long)layer * numPages + pageIdx[tok];
    const long long kOut = ((page * 2 + 0) * pageSize + offsets[tok]) * tokenElems;
    const long long vOut = kOut + (long long)pageSize * tokenElems;
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
            store_f(q, qDt, dst + c1, x1 * c - x2 * s);
            store_f(q, qDt, dst + c2, x2 * c + x1 * s);
        } else {
            const float x1 = load_f(qkv, inDt, src + c1), x2 = load_f(qkv, inDt, src + c2);
            const long long dst = kOut + (long long)(h - qHeads) * headDim;
            store_f(pool, poolDt, dst + c1, round_to(inDt, x1 * c - x2 * s));
            store_f(pool, poolDt, dst + c2, round_to(inDt, x2 * c + x1 * s));
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
