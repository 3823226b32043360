// Ring attention (frame streams): a frame's queries attend an explicit list of rows of a ring layer buffer
// [rows, 2, kvHeads, headDim], all of them (no mask: the list is the ring's visibility rule already applied).
// Block (frame, query head, query tile) runs kRingWarps warps, one query row each; a lane holds headDim / 32
// elements of the query and the accumulator and the warp walks the frame's rows with an online softmax.
// Frames are a few hundred keys, so one pass per warp is enough; K/V rows of a frame stay hot in L2 across
// the warps and heads that read them. ring_append writes a frame's K and V into the rows attention reads.
#include "common.cuh"

using namespace mstar;

namespace {
constexpr int kRingWarps = 4;
constexpr int kRingMaxPerLane = 8;  // head dims up to 256; CudaOps.ringAttention refuses larger ones
}  // namespace

extern "C" __global__ void __launch_bounds__(kRingWarps * 32)
    ring_attention(const void* q, int qDt, const void* ring, int ringDt, const int* qoIndptr, const int* kvIndptr,
                   const int* kvRows, void* out, int outDt, int qoHeads, int kvHeads, int headDim, float smScale) {
    mstar::await_previous_kernel();
    const int s = blockIdx.x, h = blockIdx.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row = qoIndptr[s] + blockIdx.z * kRingWarps + warp;
    if (row >= qoIndptr[s + 1]) return;
    const int per = headDim / 32;
    const int kvHead = h / (qoHeads / kvHeads);
    const long long qBase = ((long long)row * qoHeads + h) * headDim;
    float qv[kRingMaxPerLane], acc[kRingMaxPerLane];
#pragma unroll
    for (int i = 0; i < kRingMaxPerLane; ++i) {
        qv[i] = i < per ? load_f(q, qDt, qBase + lane + 32 * i) : 0.f;
        acc[i] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    const long long kvStride = (long long)kvHeads * headDim;  // one of K or V of one row
    for (int j = kvIndptr[s]; j < kvIndptr[s + 1]; ++j) {
        const long long kBase = (long long)kvRows[j] * 2 * kvStride + (long long)kvHead * headDim;
        const long long vBase = kBase + kvStride;
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < kRingMaxPerLane; ++i)
            if (i < per) dot += qv[i] * load_f(ring, ringDt, kBase + lane + 32 * i);
        const float score = smScale * warp_sum(dot);
        const float mNew = fmaxf(m, score);
        const float correction = expf(m - mNew);  // 0 on the first key (m = -inf)
        const float weight = expf(score - mNew);
        l = l * correction + weight;
#pragma unroll
        for (int i = 0; i < kRingMaxPerLane; ++i)
            if (i < per) acc[i] = acc[i] * correction + weight * load_f(ring, ringDt, vBase + lane + 32 * i);
        m = mNew;
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
    for (int i = 0; i < kRingMaxPerLane; ++i)
        if (i < per) store_f(out, outDt, qBase + lane + 32 * i, acc[i] * inv);
}

// ring[rows[i], 0] = k[i], ring[rows[i], 1] = v[i]: a frame's K and V into its session's tail rows.
extern "C" __global__ void ring_append(const void* k, int kDt, const void* v, int vDt, void* ring, int ringDt,
                                       const int* rows, long long n, int width) {
    mstar::await_previous_kernel();
    MSTAR_GRID_LOOP(i, n * width) {
        const long long t = i / width;
        const int e = (int)(i - t * width);
        const long long base = (long long)rows[t] * 2 * width + e;
        store_f(ring, ringDt, base, load_f(k, kDt, i));
        store_f(ring, ringDt, base + width, load_f(v, vDt, i));
    }
}
