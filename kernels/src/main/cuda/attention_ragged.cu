// Ragged (cacheless, varlen) attention: span r's queries q[qIndptr[r] .. qIndptr[r+1]) attend its keys and
// values k, v[kvIndptr[r] .. kvIndptr[r+1]), packed [tokens, heads, headDim] (cu_seqlens style). The mask is
// causalBlock: 0 = every key of the span; B >= 1 = query i, at position p = kvLen - qLen + i, sees keys
// [0, min(kvLen, (p / B + 1) * B)): its own block and every earlier one (B = 1 is causal).
//
// Two kernels: bf16 on the tensor cores, the body of attention_prefill_mma.cu (which mstar_kernels.cu includes
// before this file) reading contiguous spans instead of pages; and, for fp32 and as the CUDA-core path, block
// (query tile, query head, span) walking the keys its queries may see in tiles staged through shared memory,
// with an online softmax per query row in fp32.
#include "attention.cuh"

using namespace mstar;

namespace {

constexpr int kRaggedThreads = 128;
constexpr int kRaggedQ = 32;  // query rows per block: 4 threads per row
constexpr int kRaggedK = 32;  // keys per tile: 8 per thread

// The block mask, as the paged kernels' Mask: keys [lo, hi) the query at position qpos may see.
struct BlockMask {
    int causalBlock;

    __device__ __forceinline__ void visible(int kvLen, int qLen, int qpos, int& lo, int& hi) const {
        lo = 0;
        if (causalBlock == 0) {
            hi = kvLen;
        } else {
            hi = qpos < 0 ? 0 : (int)min((long long)kvLen, ((long long)qpos / causalBlock + 1) * causalBlock);
        }
    }

    __device__ __forceinline__ int end(int qLen, int kvLen, int i) const {
        int lo, hi;
        visible(kvLen, qLen, kvLen - qLen + i, lo, hi);
        return hi;
    }
};

// Keys of the tensor-core body (see PagedKeys): span r's rows of k and v, KV head g.
struct RaggedKeys {
    const __nv_bfloat16* k;
    const __nv_bfloat16* v;
    const int* kvIndptr;
    int heads;

    struct Cursor {
        const __nv_bfloat16* base;
        const __nv_bfloat16* kHead;
        const __nv_bfloat16* vHead;
        int stride;

        __device__ __forceinline__ const __nv_bfloat16* key(int pos) const { return kHead + (long long)pos * stride; }
        __device__ __forceinline__ const __nv_bfloat16* value(int pos) const { return vHead + (long long)pos * stride; }
    };

    __device__ __forceinline__ int kvHeads() const { return heads; }
    __device__ __forceinline__ int length(int r) const { return kvIndptr[r + 1] - kvIndptr[r]; }

    template <int D>
    __device__ __forceinline__ Cursor cursor(int r, int g) const {
        const long long first = ((long long)kvIndptr[r] * heads + g) * D;
        return Cursor{k, k + first, v + first, heads * D};
    }
};

template <typename T, int D>
__device__ __forceinline__ void ragged_body(const T* q, const T* k, const T* v, const int* qIndptr,
                                            const int* kvIndptr, int qoHeads, int kvHeads, int causalBlock,
                                            float smScale, T* out) {
    constexpr int OPT = D / 4;  // output columns per thread: part, part + 4, ...
    // Dynamic shared memory, ((32 + 2 * 32) * (D + 1) + 32 * 33) floats: the launcher raises the 48 KB default.
    float* smem = reinterpret_cast<float*>(dynamic_smem());
    float (*qs)[D + 1] = reinterpret_cast<float (*)[D + 1]>(smem);
    float (*ks)[D + 1] = reinterpret_cast<float (*)[D + 1]>(smem + kRaggedQ * (D + 1));
    float (*vs)[D + 1] = reinterpret_cast<float (*)[D + 1]>(smem + (kRaggedQ + kRaggedK) * (D + 1));
    float (*ps)[kRaggedK + 1] = reinterpret_cast<float (*)[kRaggedK + 1]>(smem + (kRaggedQ + 2 * kRaggedK) * (D + 1));

    const int r = blockIdx.z, h = blockIdx.y, tile = blockIdx.x;
    const int qBegin = qIndptr[r], qLen = qIndptr[r + 1] - qBegin;
    if (tile * kRaggedQ >= qLen) return;
    const int kvBegin = kvIndptr[r], kvLen = kvIndptr[r + 1] - kvBegin;
    const int g = h / (qoHeads / kvHeads);
    const int firstQ = tile * kRaggedQ, lastQ = min(qLen, firstQ + kRaggedQ) - 1;

    for (int idx = threadIdx.x; idx < kRaggedQ * D; idx += kRaggedThreads) {
        const int i = idx / D, d = idx - i * D;
        const int qi = firstQ + i;
        qs[i][d] = qi < qLen ? load_elem<T>(q, ((long long)(qBegin + qi) * qoHeads + h) * D + d) * smScale * kLog2e
                             : 0.f;
    }
    // The visible end only moves right as the query advances, so the last query bounds the tile's keys.
    const BlockMask mask{causalBlock};
    const int hi = mask.end(qLen, kvLen, lastQ);

    const int row = threadIdx.x >> 2, part = threadIdx.x & 3;
    const int myQ = firstQ + row;
    const int myHi = myQ < qLen ? mask.end(qLen, kvLen, myQ) : 0;

    float m = -INFINITY, l = 0.f, o[OPT];
#pragma unroll
    for (int c = 0; c < OPT; ++c) o[c] = 0.f;

    for (int kt = 0; kt < hi; kt += kRaggedK) {
        __syncthreads();  // the previous tile is fully consumed
        for (int idx = threadIdx.x; idx < kRaggedK * D; idx += kRaggedThreads) {
            const int j = idx / D, d = idx - j * D;
            const int pos = kt + j;
            const long long off = ((long long)(kvBegin + pos) * kvHeads + g) * D + d;
            ks[j][d] = pos < hi ? load_elem<T>(k, off) : 0.f;
            vs[j][d] = pos < hi ? load_elem<T>(v, off) : 0.f;
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
            if (kt + part * 8 + jj >= myHi) s[jj] = -INFINITY;
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
        for (int j = 0; j < kRaggedK; ++j) {
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

#define MSTAR_RAGGED(NAME, T, D)                                                                                 \
    extern "C" __global__ void __launch_bounds__(kRaggedThreads)                                                 \
        NAME(const T* q, const T* k, const T* v, const int* qIndptr, const int* kvIndptr, int qoHeads, int kvHeads, \
             int causalBlock, float smScale, T* out) {                                                           \
        mstar::await_previous_kernel();                                                                          \
        ragged_body<T, D>(q, k, v, qIndptr, kvIndptr, qoHeads, kvHeads, causalBlock, smScale, out);              \
    }

MSTAR_RAGGED(attn_ragged_f32_d32, float, 32)
MSTAR_RAGGED(attn_ragged_f32_d64, float, 64)
MSTAR_RAGGED(attn_ragged_f32_d128, float, 128)
MSTAR_RAGGED(attn_ragged_f32_d256, float, 256)
MSTAR_RAGGED(attn_ragged_bf16_d32, __nv_bfloat16, 32)
MSTAR_RAGGED(attn_ragged_bf16_d64, __nv_bfloat16, 64)
MSTAR_RAGGED(attn_ragged_bf16_d128, __nv_bfloat16, 128)
MSTAR_RAGGED(attn_ragged_bf16_d256, __nv_bfloat16, 256)

// Dynamic shared memory: MmaPrefillShape<D>::SMEM_BYTES (CudaRaggedAttention computes the same).
#define MSTAR_RAGGED_MMA(D)                                                                                        \
    extern "C" __global__ void __launch_bounds__(MmaPrefillShape<D>::THREADS) attn_ragged_mma_bf16_d##D(           \
        const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const int* qIndptr,                \
        const int* kvIndptr, int qoHeads, int kvHeads, int causalBlock, float smScale, __nv_bfloat16* out) {      \
        mstar::await_previous_kernel();                                                                           \
        prefill_mma_body<D, MmaPrefillShape<D>>(q, RaggedKeys{k, v, kvIndptr, kvHeads}, BlockMask{causalBlock},    \
                                                qIndptr, qoHeads, smScale, out);                                   \
    }

MSTAR_RAGGED_MMA(64)
MSTAR_RAGGED_MMA(80)
MSTAR_RAGGED_MMA(96)
MSTAR_RAGGED_MMA(128)
// DeepSeek-V2's up-projected prefill: 192-wide query and key heads (128 nope + 64 rope), values padded to 192
MSTAR_RAGGED_MMA(192)
MSTAR_RAGGED_MMA(256)
