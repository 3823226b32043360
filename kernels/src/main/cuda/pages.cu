// KV pool writes and page-granular copies. The pool is [layers, pages, 2, pageSize, kvHeads, headDim].
#include "common.cuh"

using namespace mstar;

// One block per token: pool[layer, pageIdx[i], 0|1, offsets[i], :, :] = k[i] | v[i].
extern "C" __global__ void kv_append(void* pool, int poolDt, const void* k, int kDt, const void* v, int vDt,
                                     const int* pageIdx, const int* offsets, int layer, int numPages, int pageSize,
                                     int tokenElems) {
    mstar::await_previous_kernel();
    const long long i = blockIdx.x;
    const long long kBase = pool_slot(layer, numPages, pageIdx[i], 0, pageSize, offsets[i], tokenElems);
    const long long vBase = pool_slot(layer, numPages, pageIdx[i], 1, pageSize, offsets[i], tokenElems);
    for (int e = threadIdx.x; e < tokenElems; e += blockDim.x) {
        store_f(pool, poolDt, kBase + e, load_f(k, kDt, i * tokenElems + e));
        store_f(pool, poolDt, vBase + e, load_f(v, vDt, i * tokenElems + e));
    }
}

// Copies chunk i of every layer: dst[layer][dstIdx ? dstIdx[i] : i] = src[layer][srcIdx ? srcIdx[i] : i].
// Serves copyPages, gatherPages, scatterPages (a chunk = one page of one layer) and gatherRows (one layer,
// a chunk = one row). Grid: (n, layers). Chunks in one call must not overlap.
extern "C" __global__ void chunk_copy(const char* src, long long srcLayerStride, const int* srcIdx, char* dst,
                                      long long dstLayerStride, const int* dstIdx, long long chunkBytes) {
    mstar::await_previous_kernel();
    const int i = blockIdx.x;
    const long long layer = blockIdx.y;
    const char* s = src + layer * srcLayerStride + (srcIdx ? (long long)srcIdx[i] : i) * chunkBytes;
    char* d = dst + layer * dstLayerStride + (dstIdx ? (long long)dstIdx[i] : i) * chunkBytes;
    if ((((uintptr_t)s | (uintptr_t)d | (uintptr_t)chunkBytes) & 15) == 0) {
        const uint4* s4 = reinterpret_cast<const uint4*>(s);
        uint4* d4 = reinterpret_cast<uint4*>(d);
        for (long long j = threadIdx.x; j < chunkBytes / 16; j += blockDim.x) d4[j] = s4[j];
    } else if ((((uintptr_t)s | (uintptr_t)d | (uintptr_t)chunkBytes) & 3) == 0) {
        const uint32_t* s4 = reinterpret_cast<const uint32_t*>(s);
        uint32_t* d4 = reinterpret_cast<uint32_t*>(d);
        for (long long j = threadIdx.x; j < chunkBytes / 4; j += blockDim.x) d4[j] = s4[j];
    } else {
        for (long long j = threadIdx.x; j < chunkBytes; j += blockDim.x) d[j] = s[j];
    }
}
