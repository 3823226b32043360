// Prefill attention on Hopper's warpgroup products (sm_90a): the flash-attention loop of attention_prefill_mma.cu
// with S = Q Kᵀ and O += P V both on wgmma. Each of a block's two warpgroups owns 64 packed (query, grouped head)
// rows; S comes from Q and K in shared memory, P stays in registers (S's accumulators rounded to bf16 are the A
// fragments of the second product) and V is read MN-major from the same swizzled tile layout as K, so a key tile is
// staged once for both products with no transpose. Key tiles of KEYS keys stream through STAGES stages by cp.async
// straight from the pages (or ragged spans), as the mma.sync kernel's; the masks and the walk over only the visible
// key tiles are that kernel's. Key tiles are wider than the mma.sync kernel's, so a row's sums are taken in another
// order: the engine keeps that kernel where decode and prefill rows must give the same bits (batch-invariant mode).
#include "attention.cuh"
#include "mma.cuh"
#include "wgmma.cuh"

using namespace mstar;

namespace {

// A tile of R rows of D bf16 lies as D / 64 column blocks of R rows x 128 bytes in wgmma's swizzled layout.
template <int D, int KEYS_, int STAGES_, bool OVERLAP_ = false>
struct WgmmaShape {
    static_assert(D % 64 == 0, "head dim must be a multiple of 64 (one swizzled column block)");
    static constexpr int THREADS = 256;  // two warpgroups
    static constexpr int ROWS = 128;     // packed rows per block, 64 per warpgroup
    static constexpr int KEYS = KEYS_;
    static constexpr int STAGES = STAGES_;
    static constexpr bool OVERLAP = OVERLAP_;  // a tile's values multiplied beside the next tile's scores
    static constexpr int CHUNKS = D / 8;  // 16-byte pieces per row
    static constexpr int Q_BYTES = ROWS * D * 2;
    static constexpr int TILE_BYTES = KEYS * D * 2;  // K or V of one stage
    // Q, then K and V of each stage; 1 KB to align the start on the swizzle's 1024 bytes.
    static constexpr int SMEM_BYTES = Q_BYTES + 2 * STAGES * TILE_BYTES + 1024;
};

// d128: S (64 regs) + O (64) + P (32) fit a thread's registers with 128-key tiles; d192's O takes 96, so its tiles
// are of 64 keys.
template <int D>
using WgmmaPrefillShape = WgmmaShape<D, D <= 128 ? 128 : 64, 2>;

// Byte offset of 16-byte piece c of row `row` in a tile of `rows` rows.
__device__ __forceinline__ uint32_t tile_offset(int rows, int row, int c) {
    return (uint32_t)(c >> 3) * rows * 128 + wgmma_swizzled(row, c & 7);
}

template <int KEYS>
__device__ __forceinline__ void wgmma_scores(float (&s)[KEYS / 2], uint64_t a, uint64_t b, int accumulate) {
    if constexpr (KEYS == 128) {
        wgmma_m64n128k16_bf16(s, a, b, accumulate);
    } else {
        static_assert(KEYS == 64, "key tiles of 64 or 128");
        wgmma_m64n64k16_bf16(s, a, b, accumulate);
    }
}

template <int D>
__device__ __forceinline__ void wgmma_values(float (&o)[D / 2], const uint32_t (&p)[4], uint64_t b) {
    if constexpr (D == 128) {
        wgmma_m64n128k16_bf16_rt(o, p, b, 1);
    } else {
        static_assert(D == 192, "head dim 128 or 192");
        wgmma_m64n192k16_bf16_rt(o, p, b, 1);
    }
}

// Keys and M as prefill_mma_body's: where a block finds its keys, and which of them each query sees.
template <int D, class S, class Keys, class M>
__device__ __forceinline__ void prefill_wgmma_body(const __nv_bfloat16* q, Keys kv, M mask, const int* qoIndptr,
                                                   int qoHeads, float smScale, __nv_bfloat16* out) {
    constexpr int ROWS = S::ROWS, KEYS = S::KEYS, CHUNKS = S::CHUNKS;
    unsigned char* raw = dynamic_smem();
    unsigned char* smem = wgmma_tiles(raw);
    unsigned char* qs = smem;
    unsigned char* kvs = smem + S::Q_BYTES;  // stage s: K at 2s tiles, V at 2s + 1

    const int r = blockIdx.z, g = blockIdx.y;
    const int qBegin = qoIndptr[r], qLen = qoIndptr[r + 1] - qBegin;
    const int group = qoHeads / kv.kvHeads();
    const int packedRows = qLen * group;
    const int tile = gridDim.x - 1 - blockIdx.x;  // later tiles see more keys under a causal mask: launch them first
    const int rowBegin = tile * ROWS;
    if (rowBegin >= packedRows) return;
    const int kvLen = kv.length(r);
    const int firstQ = rowBegin / group, lastQ = (min(packedRows, rowBegin + ROWS) - 1) / group;

    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
    const int g8 = lane >> 2, q4 = lane & 3;

    // Q rows of this tile (zeros past the sequence's rows: a warpgroup with none computes on zeros and stores nothing,
    // which keeps every wgmma outside a branch), one commit group of their own.
    for (int idx = tid; idx < ROWS * CHUNKS; idx += S::THREADS) {
        const int row = idx / CHUNKS, c = idx - row * CHUNKS;
        const int packed = rowBegin + row;
        const bool valid = packed < packedRows;
        const __nv_bfloat16* src = valid ? q + packed_row<D>(packed, group, g, qBegin, qoHeads) + c * 8 : q;
        cp_async16(qs + tile_offset(ROWS, row, c), src, valid);
    }
    cp_async_commit();

    int lo, hi, allLo, allHi;
    mask.visible(kvLen, qLen, kvLen - qLen + firstQ, lo, allHi);
    mask.visible(kvLen, qLen, kvLen - qLen + lastQ, allLo, hi);
    lo -= lo % KEYS;

    // This thread's rows: 16 warp + g8 and + 8 of its warpgroup's 64, as query positions.
    int rowPos[2];
#pragma unroll
    for (int half = 0; half < 2; ++half)
        rowPos[half] = kvLen - qLen + (rowBegin + 64 * wg + 16 * warp + g8 + 8 * half) / group;

    const typename Keys::Cursor keys = kv.template cursor<D>(r, g);
    auto loadTile = [&](int kt, int stage) {
        unsigned char* ks = kvs + (2 * stage) * S::TILE_BYTES;
        unsigned char* vs = ks + S::TILE_BYTES;
        for (int idx = tid; idx < KEYS * CHUNKS; idx += S::THREADS) {
            const int j = idx / CHUNKS, c = idx - j * CHUNKS;
            const int pos = kt + j;
            const bool valid = pos < hi;  // keys past the block's range are zero-filled (and masked)
            const uint32_t at = tile_offset(KEYS, j, c);
            cp_async16(ks + at, valid ? keys.key(pos) + c * 8 : keys.base, valid);
            cp_async16(vs + at, valid ? keys.value(pos) + c * 8 : keys.base, valid);
        }
    };

    const float scaleLog2 = smScale * kLog2e;
    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const uint32_t qBase = smem_addr(qs) + 64 * wg * 128;
    auto stageBase = [&](int stage) { return smem_addr(kvs + (2 * stage) * S::TILE_BYTES); };

    // S = Q Kᵀ of the tile in `stage`, issued (the caller fences before and commits after).
    auto issueScores = [&](float (&sc)[KEYS / 2], int stage) {
        const uint32_t kBase = stageBase(stage);
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
            const uint32_t col = (ks & 3) * 32;  // 16 elements into a 64-column block
            wgmma_scores<KEYS>(sc, wgmma_desc(qBase + (ks >> 2) * ROWS * 128 + col),
                               wgmma_desc(kBase + (ks >> 2) * KEYS * 128 + col), ks > 0);
        }
    };
    // O += P V of the tile in `stage`, issued likewise.
    auto issueValues = [&](const uint32_t (&pf)[KEYS / 16][4], int stage) {
        const uint32_t vBase = stageBase(stage) + S::TILE_BYTES;
#pragma unroll
        for (int kk = 0; kk < KEYS / 16; ++kk)
            wgmma_values<D>(o, pf[kk], wgmma_desc_mn(vBase + kk * 2048, KEYS * 128));
    };
    // The online softmax of the scores of keys kt ..: masks them, moves each row's maximum and sum on, and packs P's A
    // fragments (all of them before the next product: a register write between products makes the compiler wait);
    // alpha is what O must be scaled by before this tile's values are added. sc[4j + v]: row 16 warp + g8 + 8 (v / 2),
    // key kt + 8j + 2 q4 + v % 2. Scores stay unscaled: the max is taken on raw scores and the scale folds into one
    // FMA per exp.
    auto softmax = [&](float (&sc)[KEYS / 2], int kt, uint32_t (&pf)[KEYS / 16][4], float (&alpha)[2]) {
        if (kt < allLo || kt + KEYS > allHi) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                int rowLo, rowHi;
                mask.visible(kvLen, qLen, rowPos[half], rowLo, rowHi);
#pragma unroll
                for (int j = 0; j < KEYS / 8; ++j) {
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int key = kt + 8 * j + 2 * q4 + e;
                        if (key < rowLo || key >= rowHi) sc[4 * j + 2 * half + e] = -INFINITY;
                    }
                }
            }
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < KEYS / 8; ++j) mx = fmaxf(mx, fmaxf(sc[4 * j + 2 * half], sc[4 * j + 2 * half + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float mNew = fmaxf(m[half], mx);
            const float base = mNew == -INFINITY ? 0.f : mNew * scaleLog2;
            // exactly 1 when the maximum did not move (see attention_prefill_mma.cu)
            alpha[half] = mNew == m[half] ? 1.f : fast_exp2(m[half] * scaleLog2 - base);
            m[half] = mNew;
            float sum = 0.f;
#pragma unroll
            for (int j = 0; j < KEYS / 8; ++j) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float& x = sc[4 * j + 2 * half + e];
                    x = fast_exp2(fmaf(x, scaleLog2, -base));
                    sum += x;
                }
            }
            l[half] = l[half] * alpha[half] + sum;  // this lane's share; the row's lanes are summed at the end
        }
#pragma unroll
        for (int kk = 0; kk < KEYS / 16; ++kk)
#pragma unroll
            for (int i = 0; i < 4; ++i) pf[kk][i] = pack_bf16(sc[8 * kk + 2 * i], sc[8 * kk + 2 * i + 1]);
    };
    auto rescale = [&](const float (&alpha)[2]) {
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
#pragma unroll
            for (int v = 0; v < 4; ++v) o[4 * j + v] *= alpha[v >> 1];
        }
    };

    const int tiles = hi > lo ? (hi - lo + KEYS - 1) / KEYS : 0;
    if constexpr (!S::OVERLAP) {
        // The first STAGES - 1 tiles in flight, a commit group each (empty past the last tile); then per tile the
        // scores, the softmax and the values one after the other, the two warpgroups side by side.
#pragma unroll
        for (int st = 0; st < S::STAGES - 1; ++st) {
            if (st < tiles) loadTile(lo + st * KEYS, st);
            cp_async_commit();
        }
        for (int t = 0; t < tiles; ++t) {
            const int kt = lo + t * KEYS;
            if (t + S::STAGES - 1 < tiles) loadTile(kt + (S::STAGES - 1) * KEYS, (t + S::STAGES - 1) % S::STAGES);
            cp_async_commit();
            cp_async_wait<S::STAGES - 1>();  // Q and tile t are in
            fence_async_shared();
            __syncthreads();
            float sc[KEYS / 2], alpha[2];
            uint32_t pf[KEYS / 16][4];
            wgmma_fence();
            issueScores(sc, t % S::STAGES);
            wgmma_commit();
            wgmma_wait<0>();
            wgmma_hold(sc);
            softmax(sc, kt, pf, alpha);
            rescale(alpha);
            wgmma_fence();
            issueValues(pf, t % S::STAGES);
            wgmma_commit();
            wgmma_wait<0>();
            wgmma_hold(o);
            __syncthreads();  // both warpgroups are done with this stage before it is refilled
        }
    } else {
        // Tile t's values are multiplied while tile t + 1's scores are and then go through the softmax: the tensor
        // cores work while the warps exponentiate. Three stages: t's values, t + 1's keys, t + 2 arriving.
        static_assert(S::STAGES == 3, "the overlapped loop keeps three tiles in shared memory");
        float sc[KEYS / 2], alpha[2];
        uint32_t pf[KEYS / 16][4], pfNext[KEYS / 16][4];
        if (tiles > 0) loadTile(lo, 0);
        cp_async_commit();
        if (tiles > 1) loadTile(lo + KEYS, 1);
        cp_async_commit();
        cp_async_wait<1>();  // Q and tile 0
        fence_async_shared();
        __syncthreads();
        if (tiles > 0) {
            wgmma_fence();
            issueScores(sc, 0);
            wgmma_commit();
            wgmma_wait<0>();
            wgmma_hold(sc);
            softmax(sc, lo, pf, alpha);  // O is still zero: nothing to rescale
        }
        // Tile t's values from one set of P fragments while the softmax fills the other: the two swap roles each
        // tile (a copy between them would count as defining a product's inputs while products run). Every tile but
        // the last: no product under a branch, which would make the compiler serialise them.
        auto step = [&](int t, uint32_t (&cur)[KEYS / 16][4], uint32_t (&nxt)[KEYS / 16][4]) {
            cp_async_wait<0>();  // tile t + 1
            fence_async_shared();
            __syncthreads();  // tile t + 1 is visible, and every warpgroup is done with tile t - 1's stage
            if (t + 2 < tiles) loadTile(lo + (t + 2) * KEYS, (t + 2) % 3);
            cp_async_commit();
            wgmma_fence();
            issueScores(sc, (t + 1) % 3);
            wgmma_commit();
            issueValues(cur, t % 3);
            wgmma_commit();
            wgmma_wait<1>();  // the scores, committed first
            wgmma_hold(sc);
            softmax(sc, lo + (t + 1) * KEYS, nxt, alpha);
            wgmma_wait<0>();
            wgmma_hold(o);
            rescale(alpha);
        };
        int t = 0;
        for (; t + 2 < tiles; t += 2) {
            step(t, pf, pfNext);
            step(t + 1, pfNext, pf);
        }
        if (t + 1 < tiles) {
            step(t, pf, pfNext);
            ++t;
        }
        // the last tile's values, from whichever set its softmax filled
        auto last = [&](const uint32_t (&cur)[KEYS / 16][4]) {
            wgmma_fence();
            issueValues(cur, (tiles - 1) % 3);
            wgmma_commit();
            wgmma_wait<0>();
            wgmma_hold(o);
        };
        if (tiles > 0 && t % 2 == 0) last(pf);
        if (tiles > 0 && t % 2 == 1) last(pfNext);
    }
    cp_async_wait<0>();

#pragma unroll
    for (int half = 0; half < 2; ++half) {
        float sum = l[half];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const int packed = rowBegin + 64 * wg + 16 * warp + g8 + 8 * half;
        if (packed >= packedRows) continue;
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        uint32_t* dst = reinterpret_cast<uint32_t*>(out + packed_row<D>(packed, group, g, qBegin, qoHeads) + 2 * q4);
#pragma unroll
        for (int j = 0; j < D / 8; ++j)
            dst[j * 4] = pack_bf16(o[4 * j + 2 * half] * inv, o[4 * j + 2 * half + 1] * inv);
    }
}

}  // namespace

// Dynamic shared memory: WgmmaPrefillShape<D>::SMEM_BYTES (CudaAttention computes the same). Launched only on sm_90.
extern "C" __global__ void __launch_bounds__(256, 1) attn_prefill_wgmma_bf16_d128(
    const __nv_bfloat16* q, const void* pool, const int* qoIndptr, const int* kvIndptr, const int* kvIndices,
    const int* lastPageLen, int layer, int numPages, int pageSize, int qoHeads, int kvHeads, int causal,
    int windowLeft, int contextOnly, float smScale, __nv_bfloat16* out) {
    mstar::await_previous_kernel();
    prefill_wgmma_body<128, WgmmaPrefillShape<128>>(
        q, PagedKeys{PagedKv{pool, kvIndptr, kvIndices, lastPageLen, layer, numPages, pageSize, kvHeads}},
        Mask{causal, windowLeft, contextOnly}, qoIndptr, qoHeads, smScale, out);
}

// Ragged spans (attention_ragged.cu's RaggedKeys and BlockMask, which mstar_kernels.cu includes before this file);
// d192 is DeepSeek-V2's up-projected prefill. Dynamic shared memory: WgmmaPrefillShape<D>::SMEM_BYTES.
#define MSTAR_RAGGED_WGMMA(D)                                                                                       \
    extern "C" __global__ void __launch_bounds__(256, 1) attn_ragged_wgmma_bf16_d##D(                               \
        const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const int* qIndptr,                \
        const int* kvIndptr, int qoHeads, int kvHeads, int causalBlock, float smScale, __nv_bfloat16* out) {      \
        mstar::await_previous_kernel();                                                                           \
        prefill_wgmma_body<D, WgmmaPrefillShape<D>>(q, RaggedKeys{k, v, kvIndptr, kvHeads}, BlockMask{causalBlock}, \
                                                    qIndptr, qoHeads, smScale, out);                               \
    }

MSTAR_RAGGED_WGMMA(128)
MSTAR_RAGGED_WGMMA(192)
