// Paged prefill / append attention: ragged query rows per sequence, causal or full, sliding window,
// context-only, grouped-query heads. Block (query tile, query head, sequence) walks the union of its
// queries' visible keys in tiles staged through shared memory, with an online softmax per query row.
// fp32 arithmetic on the CUDA cores; bf16 and fp32 storage, and FP8 (E4M3) pools under bf16 queries, their codes
// widened as a tile is staged.
#include "attention.cuh"

using namespace mstar;

namespace {

constexpr int kPrefillThreads = 128;
constexpr int kBq = 32;  // query rows per block: 4 threads per row
constexpr int kBk = 32;  // keys per tile: 8 per thread

template <typename T, typename KT, int D>
__device__ __forceinline__ void prefill_body(const T* q, PagedKv kv, Mask mask, const int* qoIndptr, int qoHeads,
                                             float smScale, T* out) {
    constexpr int OPT = D / 4;  // output columns per thread: part, part + 4, ...
    // Dynamic shared memory, (3 * 32 * (D + 1) + 32 * 33) floats: the launcher raises the 48 KB default.
    extern __shared__ float smem[];
    float (*qs)[D + 1] = reinterpret_cast<float (*)[D + 1]>(smem);
    float (*ks)[D + 1] = reinterpret_cast<float (*)[D + 1]>(smem + kBq * (D + 1));
    float (*vs)[D + 1] = reinterpret_cast<float (*)[D + 1]>(smem + (kBq + kBk) * (D + 1));
    float (*ps)[kBk + 1] = reinterpret_cast<float (*)[kBk + 1]>(smem + (kBq + 2 * kBk) * (D + 1));
    __shared__ long long keyOffset[kBk];

    const int r = blockIdx.z, h = blockIdx.y, tile = blockIdx.x;
    const int qBegin = qoIndptr[r], qLen = qoIndptr[r + 1] - qBegin;
    if (tile * kBq >= qLen) return;
    const int g = h / (qoHeads / kv.kvHeads);
    const int kvLen = kv.length(r);
    const int firstQ = tile * kBq, lastQ = min(qLen, firstQ + kBq) - 1;

    for (int idx = threadIdx.x; idx < kBq * D; idx += kPrefillThreads) {
        const int i = idx / D, d = idx - i * D;
        const int qi = firstQ + i;
        qs[i][d] = qi < qLen ? load_elem<T>(q, ((long long)(qBegin + qi) * qoHeads + h) * D + d) * smScale * kLog2e : 0.f;
    }
    // Visible ranges only move right as the query advances, so the tile's union is [lo(first), hi(last)).
    int lo, hi, unused;
    mask.visible(kvLen, qLen, kvLen - qLen + firstQ, lo, unused);
    mask.visible(kvLen, qLen, kvLen - qLen + lastQ, unused, hi);

    const int row = threadIdx.x >> 2, part = threadIdx.x & 3;
    const int myQ = firstQ + row;
    int myLo = 0, myHi = 0;
    if (myQ < qLen) mask.visible(kvLen, qLen, kvLen - qLen + myQ, myLo, myHi);

    float m = -INFINITY, l = 0.f, o[OPT];
#pragma unroll
    for (int c = 0; c < OPT; ++c) o[c] = 0.f;

    const KT* pool = static_cast<const KT*>(kv.pool);
    const long long vDelta = (long long)kv.pageSize * kv.kvHeads * D;
    for (int kt = lo; kt < hi; kt += kBk) {
        __syncthreads();  // the previous tile is fully consumed
        if (threadIdx.x < kBk) {
            const int pos = kt + threadIdx.x;
            keyOffset[threadIdx.x] = pos < hi ? kv.offset(r, pos, 0, g, D) : -1;
        }
        __syncthreads();
        for (int idx = threadIdx.x; idx < kBk * D; idx += kPrefillThreads) {
            const int j = idx / D, d = idx - j * D;
            const long long off = keyOffset[j];
            ks[j][d] = off >= 0 ? load_elem<KT>(pool, off + d) : 0.f;
            vs[j][d] = off >= 0 ? load_elem<KT>(pool, off + vDelta + d) : 0.f;
        }
        __syncthreads();

        float s[8];
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) s[jj] = 0.f;
        for (int d = 0; d < D; ++d) {
            const float qv = qs[row][d];
#pragma unroll
            for (int jj = 0; jj < 8; ++jj) s[jj] += qv * ks[part * 8 + jj][d];
        }
        float mx = -INFINITY;
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
            const int pos = kt + part * 8 + jj;
            if (pos < myLo || pos >= myHi) s[jj] = -INFINITY;
            mx = fmaxf(mx, s[jj]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mNew = fmaxf(m, mx);
        const float alpha = mNew == -INFINITY ? 1.f : exp2f(m - mNew);
        float psum = 0.f;
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
            const float p = mNew == -INFINITY ? 0.f : exp2f(s[jj] - mNew);
            ps[row][part * 8 + jj] = p;
            psum += p;
        }
        psum += __shfl_xor_sync(0xffffffffu, psum, 1);
        psum += __shfl_xor_sync(0xffffffffu, psum, 2);
        l = l * alpha + psum;
        m = mNew;
        __syncwarp();  // a row's 4 threads share one warp
#pragma unroll
        for (int c = 0; c < OPT; ++c) o[c] *= alpha;
        for (int j = 0; j < kBk; ++j) {
            const float p = ps[row][j];
#pragma unroll
            for (int c = 0; c < OPT; ++c) o[c] += p * vs[j][part + 4 * c];
        }
    }
    if (myQ < qLen) {
        const long long base = ((long long)(qBegin + myQ) * qoHeads + h) * D;
#pragma unroll
        for (int c = 0; c < OPT; ++c) store_elem<T>(out, base + part + 4 * c, l > 0.f ? o[c] / l : 0.f);
    }
}

}  // namespace

#define MSTAR_PREFILL(NAME, T, KT, D)                                                                            \
    extern "C" __global__ void __launch_bounds__(kPrefillThreads)                                              \
        NAME(const T* q, const void* pool, const int* qoIndptr, const int* kvIndptr, const int* kvIndices,    \
             const int* lastPageLen, int layer, int numPages, int pageSize, int qoHeads, int kvHeads, int causal, \
             int windowLeft, int contextOnly, float smScale, T* out) {                                        \
        mstar::await_previous_kernel();                                                                       \
        prefill_body<T, KT, D>(q, PagedKv{pool, kvIndptr, kvIndices, lastPageLen, layer, numPages, pageSize, kvHeads}, \
                           Mask{causal, windowLeft, contextOnly}, qoIndptr, qoHeads, smScale, out);          \
    }

MSTAR_PREFILL(attn_prefill_f32_d32, float, float, 32)
MSTAR_PREFILL(attn_prefill_f32_d64, float, float, 64)
MSTAR_PREFILL(attn_prefill_f32_d128, float, float, 128)
MSTAR_PREFILL(attn_prefill_f32_d256, float, float, 256)
MSTAR_PREFILL(attn_prefill_bf16_d32, __nv_bfloat16, __nv_bfloat16, 32)
MSTAR_PREFILL(attn_prefill_bf16_d64, __nv_bfloat16, __nv_bfloat16, 64)
MSTAR_PREFILL(attn_prefill_bf16_d128, __nv_bfloat16, __nv_bfloat16, 128)
MSTAR_PREFILL(attn_prefill_bf16_d256, __nv_bfloat16, __nv_bfloat16, 256)
MSTAR_PREFILL(attn_prefill_e4m3_d32, __nv_bfloat16, E4m3, 32)
MSTAR_PREFILL(attn_prefill_e4m3_d64, __nv_bfloat16, E4m3, 64)
MSTAR_PREFILL(attn_prefill_e4m3_d128, __nv_bfloat16, E4m3, 128)
MSTAR_PREFILL(attn_prefill_e4m3_d256, __nv_bfloat16, E4m3, 256)
