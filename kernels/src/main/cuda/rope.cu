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
    const long long tok = blockIdx.x;
    const float pos = (float)posIds[tok];
    rotate_heads(q, qDt, tok * qHeads * headDim, qHeads, headDim, rotaryDim, interleave, pos, invFreq);
    if (k != nullptr) rotate_heads(k, kDt, tok * kHeads * headDim, kHeads, headDim, rotaryDim, interleave, pos, invFreq);
}
