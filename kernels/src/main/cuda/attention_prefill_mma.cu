// Paged prefill / append attention on the tensor cores (bf16 only), flash-attention style: mma.sync
// m16n8k16 with bf16 operands and fp32 accumulators, online softmax in registers.
//
// Grouped-query heads are packed: a sequence's query rows are the pairs (query i, head j of the group),
// row R = i * group + j, so one block of rows serves every query head of one KV head and each K/V tile
// is loaded once for all of them. Block (row tile, KV head, sequence) of 8 warps, each owning 16 MT rows.
// Key tiles (KEYS keys) stream through two shared-memory stages filled by cp.async straight from the
// paged pool; a block walks only the union of its rows' visible keys (from the tile holding the first),
// so causal tiles past the diagonal and tiles left of a sliding window are never loaded, and the
// per-element mask runs only on tiles that straddle a row's limits. Queries sit at kvLen - qLen + i, so a
// chunk appended to a cached prefix uses the same kernel.
#include "attention.cuh"
#include "mma.cuh"

using namespace mstar;

namespace {

// MT 16-row mma tiles per warp: each K/V fragment read from shared memory feeds MT mma, so more rows per
// warp means less shared-memory traffic per mma; head dim 256 keeps one (its O takes the registers). Eight
// warps share each K/V tile, halving the tile loads per row against four. At d128 on an H200 (16k-token
// causal prompt, 2026-12-02) 8 warps x 2 mma tiles x 64 keys ran 304 TFLOP/s, 4 x 2 x 64 295, 4 x 2 x 32
// 275, 4 x 1 x 64 165 (the prefill kernel bench of that day); the 64-key tile spills a few registers at
// d96 and d128, which costs less than the smaller tile.
template <int D, int WARPS, int MT_>
struct MmaShape {
    static_assert(D % 16 == 0, "head dim must be a multiple of 16 (the mma k step)");
    static constexpr int THREADS = WARPS * 32;
    static constexpr int MT = MT_;
    static constexpr int ROWS = WARPS * 16 * MT;     // packed rows per block
    static constexpr int KEYS = D <= 128 ? 64 : 32;   // keys per tile: S and O share the register file
    static constexpr int STRIDE = D + 8;              // padded row (elements): rows start 16 bytes apart mod 128
    static constexpr int CHUNKS = D / 8;              // 16-byte pieces per row
    static constexpr int SMEM_BYTES = (ROWS + 4 * KEYS) * STRIDE * 2;  // Q, then K and V of two stages
};

template <int D>
using MmaPrefillShape = MmaShape<D, 8, D <= 128 ? 2 : 1>;

// Decode plans (one query of a KV head's group of query heads per sequence) fill a few rows of a block: four
// warps of one mma tile each. Keys per tile and each row's arithmetic are the prefill shape's, so a row gets
// the same bits from either shape; only the rows per block change.
template <int D>
using MmaDecodeShape = MmaShape<D, 4, 1>;

// Where a block finds its keys: the paged pool of one layer. A cursor for (sequence r, KV head g) gives the
// address of each key's and value's row of D elements.
struct PagedKeys {
    PagedKv kv;

    struct Cursor {
        const __nv_bfloat16* base;  // any valid address, for zero-filled (not read) copies
        const __nv_bfloat16* head;
        const int* pages;
        int pageSize, slotStride, pageShift;
        long long pageStride, vDelta;
        bool pow2Pages;

        __device__ __forceinline__ const __nv_bfloat16* key(int pos) const {
            // pages are found by shift when their size is a power of two (the usual case), else by division
            const int p = pow2Pages ? pos >> pageShift : pos / pageSize;
            const int slot = pos - p * pageSize;
            return head + pages[p] * pageStride + slot * slotStride;
        }
        __device__ __forceinline__ const __nv_bfloat16* value(int pos) const { return key(pos) + vDelta; }
    };

    __device__ __forceinline__ int kvHeads() const { return kv.kvHeads; }
    __device__ __forceinline__ int length(int r) const { return kv.length(r); }

    template <int D>
    __device__ __forceinline__ Cursor cursor(int r, int g) const {
        Cursor c;
        c.base = static_cast<const __nv_bfloat16*>(kv.pool);
        c.head = c.base + (long long)kv.layer * kv.numPages * 2 * kv.pageSize * kv.kvHeads * D + g * D;
        c.pages = kv.kvIndices + kv.kvIndptr[r];
        c.pageSize = kv.pageSize;
        c.slotStride = kv.kvHeads * D;
        c.pageShift = __ffs(kv.pageSize) - 1;
        c.pageStride = 2LL * kv.pageSize * c.slotStride;
        c.vDelta = (long long)kv.pageSize * c.slotStride;
        c.pow2Pages = (kv.pageSize & (kv.pageSize - 1)) == 0;
        return c;
    }
};

// Where packed row `packed` of KV head g (query i = packed / group, its head j = packed % group of the group) of a
// sequence whose queries start at qBegin lies in q [tokens, qoHeads, D], and so in out.
template <int D>
__device__ __forceinline__ long long packed_row(int packed, int group, int g, int qBegin, int qoHeads) {
    const int qi = packed / group, h = g * group + (packed - qi * group);
    return ((long long)(qBegin + qi) * qoHeads + h) * D;
}

// Body of the tensor-core kernels. Keys is where the keys live (PagedKeys here, contiguous ragged spans in
// attention_ragged.cu); M the mask, whose visible(kvLen, qLen, qpos, lo, hi) gives a query's keys [lo, hi),
// moving right as the query advances.
template <int D, class S, class Keys, class M>
__device__ __forceinline__ void prefill_mma_body(const __nv_bfloat16* q, Keys kv, M mask, const int* qoIndptr,
                                                 int qoHeads, float smScale, __nv_bfloat16* out) {
    constexpr int MT = S::MT, ROWS = S::ROWS, KEYS = S::KEYS, STRIDE = S::STRIDE, CHUNKS = S::CHUNKS;
    __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(dynamic_smem());
    __nv_bfloat16* kvs = qs + ROWS * STRIDE;  // stage s: K at (2s) * KEYS rows, V at (2s + 1) * KEYS

    const int r = blockIdx.z, g = blockIdx.y;
    const int qBegin = qoIndptr[r], qLen = qoIndptr[r + 1] - qBegin;
    const int group = qoHeads / kv.kvHeads();
    const int packedRows = qLen * group;
    // Later tiles see more keys under a causal mask: launch them first.
    const int tile = gridDim.x - 1 - blockIdx.x;
    const int rowBegin = tile * ROWS;
    if (rowBegin >= packedRows) return;
    const int kvLen = kv.length(r);
    const int firstQ = rowBegin / group, lastQ = (min(packedRows, rowBegin + ROWS) - 1) / group;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int warpRow = warp * 16 * MT;  // the warp's first row in the block; mma tile mt adds 16 mt
    const bool warpActive = rowBegin + warpRow < packedRows;

    // Q rows of this tile (zeros past the sequence's rows), one commit group of their own.
    for (int idx = tid; idx < ROWS * CHUNKS; idx += S::THREADS) {
        const int row = idx / CHUNKS, c = idx - row * CHUNKS;
        const int packed = rowBegin + row;
        const bool valid = packed < packedRows;
        const __nv_bfloat16* src = valid ? q + packed_row<D>(packed, group, g, qBegin, qoHeads) + c * 8 : q;
        cp_async16(qs + row * STRIDE + c * 8, src, valid);
    }
    cp_async_commit();

    // Visible ranges only move right as the query advances: the block's keys are [lo(first), hi(last)),
    // and a tile inside [lo(last), hi(first)) is visible to every row.
    int lo, hi, allLo, allHi;
    mask.visible(kvLen, qLen, kvLen - qLen + firstQ, lo, allHi);
    mask.visible(kvLen, qLen, kvLen - qLen + lastQ, allLo, hi);
    // Key tiles start at multiples of KEYS whatever rows share the block, so a row's keys are summed in the
    // same tiles, in the same order, whether it is computed alone, as a decode row or inside any chunk.
    lo -= lo % KEYS;

    // This thread's rows: fragment rows lane/4 and lane/4 + 8 of each of its warp's MT mma tiles, as query
    // positions (rows past the sequence's are never stored, so their mask does not matter).
    int rowPos[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half)
            rowPos[mt][half] = kvLen - qLen + (rowBegin + warpRow + mt * 16 + (lane >> 2) + half * 8) / group;

    const typename Keys::Cursor keys = kv.template cursor<D>(r, g);
    auto loadTile = [&](int kt, int stage) {
        __nv_bfloat16* ks = kvs + (2 * stage) * KEYS * STRIDE;
        __nv_bfloat16* vs = ks + KEYS * STRIDE;
        for (int idx = tid; idx < KEYS * CHUNKS; idx += S::THREADS) {
            const int j = idx / CHUNKS, c = idx - j * CHUNKS;
            const int pos = kt + j;
            const bool valid = pos < hi;  // keys past the block's range are zero-filled (and masked)
            cp_async16(ks + j * STRIDE + c * 8, valid ? keys.key(pos) + c * 8 : keys.base, valid);
            cp_async16(vs + j * STRIDE + c * 8, valid ? keys.value(pos) + c * 8 : keys.base, valid);
        }
    };

    const float scaleLog2 = smScale * kLog2e;
    float o[MT][D / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n = 0; n < D / 8; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;

    const int tiles = hi > lo ? (hi - lo + KEYS - 1) / KEYS : 0;
    if (tiles > 0) loadTile(lo, 0);
    cp_async_commit();

    // ldmatrix lane addresses: A (Q) rows lane % 16, column half lane / 16; B from K (row-major [key][d])
    // keys lane % 8 + 8 * (lane / 16), d half (lane / 8) % 2; B from V with .trans: keys
    // lane % 8 + 8 * ((lane / 8) % 2), d half lane / 16.
    const uint32_t qAddr = smem_addr(qs + (warpRow + (lane & 15)) * STRIDE + (lane >> 4) * 8);
    const int kRow = (lane & 7) + ((lane >> 4) << 3), kCol = ((lane >> 3) & 1) * 8;
    const int vRow = (lane & 7) + (((lane >> 3) & 1) << 3), vCol = (lane >> 4) * 8;

    for (int t = 0; t < tiles; ++t) {
        const int kt = lo + t * KEYS;
        if (t + 1 < tiles) loadTile(kt + KEYS, (t + 1) & 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        // A warp whose rows all lie past the sequence's only helps load tiles.
        if (warpActive) {
            const __nv_bfloat16* ks = kvs + (2 * (t & 1)) * KEYS * STRIDE;
            const __nv_bfloat16* vs = ks + KEYS * STRIDE;
            const uint32_t kAddr = smem_addr(ks + kRow * STRIDE + kCol);
            const uint32_t vAddr = smem_addr(vs + vRow * STRIDE + vCol);

            float s[MT][KEYS / 8][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int n = 0; n < KEYS / 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
            for (int kd = 0; kd < D / 16; ++kd) {
                uint32_t a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) ldmatrix_x4(a[mt], qAddr + (mt * 16 * STRIDE + kd * 16) * 2);
#pragma unroll
                for (int n2 = 0; n2 < KEYS / 16; ++n2) {
                    uint32_t b[4];
                    ldmatrix_x4(b, kAddr + (n2 * 16 * STRIDE + kd * 16) * 2);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma_bf16(s[mt][2 * n2], a[mt], b[0], b[1]);
                        mma_bf16(s[mt][2 * n2 + 1], a[mt], b[2], b[3]);
                    }
                }
            }

            // Scores stay unscaled: the max is taken on raw scores and the scale folds into one FMA per exp.
            const bool straddles = kt < allLo || kt + KEYS > allHi;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                if (straddles) {
#pragma unroll
                    for (int half = 0; half < 2; ++half) {
                        int rowLo, rowHi;
                        mask.visible(kvLen, qLen, rowPos[mt][half], rowLo, rowHi);
#pragma unroll
                        for (int n = 0; n < KEYS / 8; ++n) {
#pragma unroll
                            for (int e = 0; e < 2; ++e) {
                                const int key = kt + n * 8 + 2 * (lane & 3) + e;
                                if (key < rowLo || key >= rowHi) s[mt][n][2 * half + e] = -INFINITY;
                            }
                        }
                    }
                }

                // Online softmax per row; the row's 4 lanes (lane % 4) hold its columns.
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    float mx = -INFINITY;
#pragma unroll
                    for (int n = 0; n < KEYS / 8; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * half], s[mt][n][2 * half + 1]));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                    const float mNew = fmaxf(m[mt][half], mx);
                    // An all-masked row so far keeps p = 0 and its empty accumulator.
                    const float base = mNew == -INFINITY ? 0.f : mNew * scaleLog2;
                    // Exactly 1 when the maximum did not move: a tile all masked for this row (one past its
                    // diagonal, walked because another row of the block needs it) must leave the row's sums
                    // untouched, and m * scale - base, contracted into an fma, is not exactly 0.
                    const float alpha = mNew == m[mt][half] ? 1.f : fast_exp2(m[mt][half] * scaleLog2 - base);
                    m[mt][half] = mNew;
                    float sum = 0.f;
#pragma unroll
                    for (int n = 0; n < KEYS / 8; ++n) {
                        s[mt][n][2 * half] = fast_exp2(fmaf(s[mt][n][2 * half], scaleLog2, -base));
                        s[mt][n][2 * half + 1] = fast_exp2(fmaf(s[mt][n][2 * half + 1], scaleLog2, -base));
                        sum += s[mt][n][2 * half] + s[mt][n][2 * half + 1];
                    }
                    l[mt][half] = l[mt][half] * alpha + sum;  // this lane's share; the row's lanes are summed at the end
#pragma unroll
                    for (int n = 0; n < D / 8; ++n) {
                        o[mt][n][2 * half] *= alpha;
                        o[mt][n][2 * half + 1] *= alpha;
                    }
                }
            }

            // O += P V: the S accumulators of two adjacent 8-key tiles form P's A fragment for 16 keys.
#pragma unroll
            for (int kk = 0; kk < KEYS / 16; ++kk) {
                uint32_t a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    a[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                    a[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                    a[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                    a[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
                }
#pragma unroll
                for (int n2 = 0; n2 < D / 16; ++n2) {
                    uint32_t b[4];
                    ldmatrix_x4_trans(b, vAddr + (kk * 16 * STRIDE + n2 * 16) * 2);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma_bf16(o[mt][2 * n2], a[mt], b[0], b[1]);
                        mma_bf16(o[mt][2 * n2 + 1], a[mt], b[2], b[3]);
                    }
                }
            }
        }
        __syncthreads();  // every warp is done with this stage before it is refilled
    }
    cp_async_wait<0>();

#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            float sum = l[mt][half];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            const int packed = rowBegin + warpRow + mt * 16 + (lane >> 2) + half * 8;
            if (packed >= packedRows) continue;
            const float inv = sum > 0.f ? 1.f / sum : 0.f;
            uint32_t* dst = reinterpret_cast<uint32_t*>(out + packed_row<D>(packed, group, g, qBegin, qoHeads) +
                                                        2 * (lane & 3));
#pragma unroll
            for (int n = 0; n < D / 8; ++n) dst[n * 4] = pack_bf16(o[mt][n][2 * half] * inv, o[mt][n][2 * half + 1] * inv);
        }
    }
}

}  // namespace

// Dynamic shared memory: the shape's SMEM_BYTES (CudaAttention computes the same).
#define MSTAR_MMA_KERNEL(NAME, SHAPE, D)                                                                          \
    extern "C" __global__ void __launch_bounds__(SHAPE<D>::THREADS) NAME##D(                                      \
        const __nv_bfloat16* q, const void* pool, const int* qoIndptr, const int* kvIndptr, const int* kvIndices,   \
        const int* lastPageLen, int layer, int numPages, int pageSize, int qoHeads, int kvHeads, int causal,        \
        int windowLeft, int contextOnly, float smScale, __nv_bfloat16* out) {                                       \
        mstar::await_previous_kernel();                                                                             \
        prefill_mma_body<D, SHAPE<D>>(                                                                          \
            q, PagedKeys{PagedKv{pool, kvIndptr, kvIndices, lastPageLen, layer, numPages, pageSize, kvHeads}},          \
            Mask{causal, windowLeft, contextOnly}, qoIndptr, qoHeads, smScale, out);                                \
    }
#define MSTAR_PREFILL_MMA(D)                                   \
    MSTAR_MMA_KERNEL(attn_prefill_mma_bf16_d, MmaPrefillShape, D) \
    MSTAR_MMA_KERNEL(attn_decode_mma_bf16_d, MmaDecodeShape, D)

MSTAR_PREFILL_MMA(64)
MSTAR_PREFILL_MMA(80)
MSTAR_PREFILL_MMA(96)
MSTAR_PREFILL_MMA(128)
MSTAR_PREFILL_MMA(256)
