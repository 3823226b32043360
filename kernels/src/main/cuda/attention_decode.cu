// Paged decode attention (one query per sequence), split-KV: block (x, head group, sequence) runs an online
// softmax over slices of the visible keys for GH query heads that share one KV head, so each K/V row is read
// once for the whole group. A sequence's slice length comes from its own length and the launcher's split
// count (sized from the step's batch so the blocks fill the GPU): at least kMinSplitKeys, so short sequences
// are not cut into slivers, and at most kMaxSliceKeys (and what the shared page table holds), so one long
// sequence in a large batch is still spread over several blocks. Block x walks slices x, x + gridDim.x, ...
// With one slice the block writes the output; otherwise each slice writes a normalised partial and its
// log2-sum-exp, and the block that finishes a sequence's last slice (counted in splitDone, which it resets to
// zero) merges them: no second launch.
//
// bf16 pools at head dims 64 and 128 run the slices on the tensor cores (decode_mma_body): the CUDA-core body
// spends ~60 warp instructions per key and KV head (bf16 widening, 16-lane shuffles, fp32 FMAs), which bounds
// it below the memory's bandwidth once many sequences share a step; mma.sync does a 16-key chunk in ~100.
//
// FP8 (E4M3) pools run the CUDA-core body with bf16 queries: a lane's 16-byte copy holds 16 codes, widened two at a
// time (cvt e4m3x2 → f16x2) as the slice is read, so a key moves half the bytes of a bf16 one.
#include "attention.cuh"
#include "mma.cuh"

using namespace mstar;

namespace {

constexpr int kDecodeWarps = 4;
// Shortest and longest slice, and the slice's page-table capacity; CudaAttention.MIN_SPLIT_KEYS,
// MAX_SLICE_KEYS and SPLIT_PAGES must equal them.
constexpr int kMinSplitKeys = 128;
constexpr int kMaxSliceKeys = 2048;
constexpr int kSplitPages = 512;
// Tensor-core slices (decode_mma_body): warps per block, keys per warp chunk and cp.async stages per warp;
// CudaAttention.TC_DECODE_* must equal them. Three warps keep a block's staging at 51 KB at d128, so four
// blocks share an SM (as the CUDA-core kernel's do) and the launcher's waves stay whole; four warps would
// fit three.
constexpr int kTcDecodeWarps = 3;
constexpr int kTcDecodeKeys = 16;
constexpr int kTcDecodeStages = 2;

// Keys per slice of a sequence whose visible span is span keys, cut into up to splits slices.
__device__ __forceinline__ int slice_keys(int span, int splits, int pageSize) {
    const int cap = (kSplitPages - 1) * pageSize;  // a slice may start mid-page: one page more than its keys fill
    return min(min(cap, kMaxSliceKeys), max(kMinSplitKeys, (span + splits - 1) / splits));
}

// Launch geometry of one instantiation over a pool of KT. A lane owns EPL consecutive elements of a head; LPT lanes
// cover one token's head; a warp covers TPW tokens side by side and each lane walks U of them per step.
template <typename KT, int D, int GH>
struct DecodeShape {
    static constexpr int VEC = 16 / sizeof(KT);             // elements per 16-byte copy
    static constexpr int EPL = D / 32 > VEC ? D / 32 : VEC;  // elements per lane
    static constexpr int CHUNKS = EPL / VEC;                // 16-byte copies per lane per K or V row
    static constexpr int LPT = D / EPL;
    static constexpr int TPW = 32 / LPT;
    static constexpr int SLOTS = kDecodeWarps * TPW;  // independent softmax states per block
    static constexpr int U = GH >= 8 ? 2 : 4;         // fewer tokens per step where q and acc take more registers
    // Per warp and stage: [U][K|V][CHUNKS][32 lanes][16 bytes], so a warp's copies hit consecutive banks.
    static constexpr int WARP_STAGE_BYTES = U * 2 * CHUNKS * 32 * 16;
    static constexpr int STAGES = WARP_STAGE_BYTES * kDecodeWarps * 2 <= 32 * 1024 ? 2 : 1;
    static constexpr int STAGING_BYTES = WARP_STAGE_BYTES * kDecodeWarps * STAGES;
    static constexpr int COMBINE_BYTES = (SLOTS * GH * (D + 3) + GH) * 4;
    static constexpr int SMEM_BYTES = STAGING_BYTES > COMBINE_BYTES ? STAGING_BYTES : COMBINE_BYTES;
    static_assert(D % EPL == 0 && LPT <= 32 && 32 % LPT == 0 && EPL % VEC == 0, "head dim must split across a warp");
};

// EPL elements of one (token, K|V) row of a lane's staged copy, widened to fp32.
template <typename T, int EPL, int CHUNKS>
__device__ __forceinline__ void load_staged(const unsigned char* row, int lane, float (&dst)[EPL]) {
    constexpr int VEC = EPL / CHUNKS;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        float part[VEC];
        load_row<VEC>(reinterpret_cast<const T*>(row + (c * 32 + lane) * 16), part);
#pragma unroll
        for (int e = 0; e < VEC; ++e) dst[c * VEC + e] = part[e];
    }
}

// What a block of the grid (x: slice walker, y: KV head group, z: sequence) serves: its sequence's visible keys
// [lo, hi), cut into slices of keys keys, and the GH query heads from h0 that share KV head g.
struct DecodeBlock {
    int r, g, h0, qBegin, lo, hi, keys, slices;
    bool active;  // false: the sequence has no query, or fewer slices than this block's x

    template <int GH>
    __device__ __forceinline__ static DecodeBlock of(const PagedKv& kv, Mask mask, const int* qoIndptr, int qoHeads,
                                                     int splits) {
        DecodeBlock b;
        b.r = blockIdx.z;
        const int group = qoHeads / kv.kvHeads;
        const int blocksPerKvHead = group / GH;
        b.g = blockIdx.y / blocksPerKvHead;
        b.h0 = b.g * group + (blockIdx.y % blocksPerKvHead) * GH;
        b.qBegin = qoIndptr[b.r];
        const int qLen = qoIndptr[b.r + 1] - b.qBegin;
        b.active = qLen > 0;
        if (!b.active) return b;
        const int kvLen = kv.length(b.r);
        mask.visible(kvLen, qLen, kvLen - qLen, b.lo, b.hi);
        b.keys = slice_keys(b.hi - b.lo, splits, kv.pageSize);
        b.slices = max(1, (b.hi - b.lo + b.keys - 1) / b.keys);
        b.active = blockIdx.x < b.slices;
        return b;
    }
};

// Element offsets in the pool of the K pages holding keys [kBegin, kEnd) of sequence r (V is a page block on).
__device__ __forceinline__ void load_page_table(const PagedKv& kv, int r, int kBegin, int kEnd, long long pageElems,
                                                long long* pageBase) {
    if (kBegin >= kEnd) return;
    const int firstPage = kBegin / kv.pageSize;
    const int pages = (kEnd - 1) / kv.pageSize - firstPage + 1;
    const int* ids = kv.kvIndices + kv.kvIndptr[r] + firstPage;
    for (int i = threadIdx.x; i < pages; i += blockDim.x) {
        pageBase[i] = ((long long)kv.layer * kv.numPages + ids[i]) * 2 * pageElems;
    }
}

// Shared memory of a slice's combine: per slot (an independent softmax state of GH heads) its maximum m (log2
// units), sum l and D accumulators, which the body writes; then the slots' weights and each head's total.
template <int D, int GH, int SLOTS>
struct SliceCombine {
    static constexpr int BYTES = (SLOTS * GH * (D + 3) + GH) * 4;
    float* m;    // [SLOTS][GH]
    float* l;    // [SLOTS][GH]
    float* w;    // [SLOTS][GH]
    float* total;  // [GH]
    float* acc;  // [SLOTS][GH][D]

    __device__ __forceinline__ explicit SliceCombine(void* smem)
        : m(static_cast<float*>(smem)), l(m + SLOTS * GH), w(l + SLOTS * GH), total(w + SLOTS * GH),
          acc(total + GH) {}

    // After the slots' states are in shared memory (this starts with the barrier that publishes them): the
    // slice's normalised output, into out when the sequence has one slice, else into its partial and lse.
    template <typename T>
    __device__ __forceinline__ void finish(const DecodeBlock& b, int split, int qoHeads, int sliceStride, T* out,
                                           float* partialO, float* partialLse) const {
        __syncthreads();
        if (threadIdx.x < GH) {
            const int j = threadIdx.x;
            float mAll = -INFINITY;
            for (int s = 0; s < SLOTS; ++s) mAll = fmaxf(mAll, m[s * GH + j]);
            float sum = 0.f;
            for (int s = 0; s < SLOTS; ++s) {
                const float ws = mAll == -INFINITY ? 0.f : exp2f(m[s * GH + j] - mAll);
                w[s * GH + j] = ws;
                sum += ws * l[s * GH + j];
            }
            total[j] = sum;
            if (b.slices > 1) {
                partialLse[((long long)b.r * qoHeads + b.h0 + j) * sliceStride + split] =
                    sum > 0.f ? mAll + log2f(sum) : -INFINITY;
            }
        }
        __syncthreads();
        for (int idx = threadIdx.x; idx < GH * D; idx += blockDim.x) {
            const int j = idx / D, d = idx - j * D;
            float o = 0.f;
            for (int s = 0; s < SLOTS; ++s) o += w[s * GH + j] * acc[(s * GH + j) * D + d];
            const float v = total[j] > 0.f ? o / total[j] : 0.f;
            if (b.slices == 1) {
                store_elem<T>(out, ((long long)b.qBegin * qoHeads + b.h0 + j) * D + d, v);
            } else {
                partialO[(((long long)b.r * qoHeads + b.h0 + j) * sliceStride + split) * D + d] = v;
            }
        }
    }
};

// The block that completes the sequence's last slice merges:
// out = sum_s 2^(lse_s - M) o_s / sum_s 2^(lse_s - M). scratch: 2 GH floats of shared memory.
template <typename T, int D, int GH>
__device__ __forceinline__ void merge_slices(const DecodeBlock& b, int qoHeads, int sliceStride, T* out,
                                             const float* partialO, const float* partialLse, int* splitDone,
                                             float* scratch, int* lastBlock) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int stride = gridDim.x;
    __threadfence();  // this block's partials are visible device-wide before it is counted
    __syncthreads();
    if (threadIdx.x == 0) {
        const int mine = (b.slices - 1 - blockIdx.x) / stride + 1;
        int* done = splitDone + (long long)b.r * gridDim.y + blockIdx.y;
        *lastBlock = atomicAdd(done, mine) + mine == b.slices;
        if (*lastBlock) *done = 0;  // every other block has counted: ready for the next launch
    }
    __syncthreads();
    if (!*lastBlock) return;
    __threadfence();
    float* mergeMax = scratch;         // [GH]
    float* mergeTotal = scratch + GH;  // [GH]
    for (int j = warp; j < GH; j += warps) {
        const float* lse = partialLse + ((long long)b.r * qoHeads + b.h0 + j) * sliceStride;
        float mAll = -INFINITY;
        for (int s = lane; s < b.slices; s += 32) mAll = fmaxf(mAll, __ldcg(lse + s));
        mAll = warp_max(mAll);
        float total = 0.f;
        if (mAll != -INFINITY) {
            for (int s = lane; s < b.slices; s += 32) total += exp2f(__ldcg(lse + s) - mAll);
        }
        total = warp_sum(total);
        if (lane == 0) {
            mergeMax[j] = mAll;
            mergeTotal[j] = total;
        }
    }
    __syncthreads();
    // Four consecutive elements per thread; the slice loop is unrolled so that many partial reads from L2
    // are in flight at once.
    constexpr int D4 = D / 4;
    for (int idx = threadIdx.x; idx < GH * D4; idx += blockDim.x) {
        const int j = idx / D4, d4 = idx - j * D4;
        const long long head = (long long)b.r * qoHeads + b.h0 + j;
        const float total = mergeTotal[j], mx = mergeMax[j];
        const float* lse = partialLse + head * sliceStride;
        const float4* po = reinterpret_cast<const float4*>(partialO + head * sliceStride * D) + d4;
        float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
        if (total > 0.f) {
#pragma unroll 8
            for (int s = 0; s < b.slices; ++s) {
                const float w = exp2f(__ldcg(lse + s) - mx);
                const float4 p = __ldcg(po + (long long)s * D4);
                o.x += w * p.x;
                o.y += w * p.y;
                o.z += w * p.z;
                o.w += w * p.w;
            }
        }
        const float inv = total > 0.f ? 1.f / total : 0.f;
        const long long at = ((long long)b.qBegin * qoHeads + b.h0 + j) * D + d4 * 4;
        store_elem<T>(out, at, o.x * inv);
        store_elem<T>(out, at + 1, o.y * inv);
        store_elem<T>(out, at + 2, o.z * inv);
        store_elem<T>(out, at + 3, o.w * inv);
    }
}

// K and V are staged through shared memory with cp.async, STAGES deep per warp: the copies of the next step
// are in flight while this step computes. Each lane copies exactly the bytes it later reads, so a lane's own
// wait_group orders them and no barrier is needed inside the loop. The page ids of a slice's keys are read
// once into shared memory. The pool holds KT: T (the queries' type), or E4M3 codes widened as they are read.
template <typename T, typename KT, int D, int GH>
__device__ __forceinline__ void decode_body(const T* q, PagedKv kv, Mask mask, const int* qoIndptr, int qoHeads,
                                            float smScale, int splits, int sliceStride, T* out, float* partialO,
                                            float* partialLse, int* splitDone) {
    using S = DecodeShape<KT, D, GH>;
    constexpr int EPL = S::EPL, CHUNKS = S::CHUNKS, LPT = S::LPT, TPW = S::TPW, SLOTS = S::SLOTS, U = S::U;
    constexpr int STAGES = S::STAGES;
    using Combine = SliceCombine<D, GH, SLOTS>;

    __shared__ __align__(16) unsigned char smem[S::SMEM_BYTES];
    __shared__ long long pageBase[kSplitPages];  // element offset of each K page of the slice in the pool
    __shared__ int lastBlock;

    const DecodeBlock b = DecodeBlock::of<GH>(kv, mask, qoIndptr, qoHeads, splits);
    if (!b.active) return;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int slotInWarp = lane / LPT, sub = lane % LPT;
    const int slot = warp * TPW + slotInWarp;

    float qf[GH][EPL];
#pragma unroll
    for (int j = 0; j < GH; ++j) {
        load_row<EPL>(q + ((long long)b.qBegin * qoHeads + b.h0 + j) * D + sub * EPL, qf[j]);
#pragma unroll
        for (int e = 0; e < EPL; ++e) qf[j][e] *= smScale * kLog2e;
    }
    const long long pageElems = (long long)kv.pageSize * kv.kvHeads * D;  // one K or V block of a page
    const KT* pool = static_cast<const KT*>(kv.pool);
    const int laneOffset = b.g * D + sub * EPL;  // within a token's row of heads
    unsigned char* warpStaging = smem + warp * STAGES * S::WARP_STAGE_BYTES;
    const Combine combine(smem);

    for (int split = blockIdx.x; split < b.slices; split += gridDim.x) {
        const int kBegin = b.lo + split * b.keys;
        const int kEnd = min(b.hi, kBegin + b.keys);
        const int firstPage = kBegin / kv.pageSize;
        __syncthreads();  // the previous slice's combine is done with the shared memory
        load_page_table(kv, b.r, kBegin, kEnd, pageElems, pageBase);
        __syncthreads();

        float m[GH], l[GH], acc[GH][EPL];
#pragma unroll
        for (int j = 0; j < GH; ++j) {
            m[j] = -INFINITY;
            l[j] = 0.f;
#pragma unroll
            for (int e = 0; e < EPL; ++e) acc[j][e] = 0.f;
        }

        const int warpFirst = kBegin + warp * TPW * U;
        const int steps = warpFirst < kEnd ? (kEnd - warpFirst + SLOTS * U - 1) / (SLOTS * U) : 0;

        auto issue = [&](int step) {
            unsigned char* stage = warpStaging + (step % STAGES) * S::WARP_STAGE_BYTES;
            const int t0 = warpFirst + step * SLOTS * U + slotInWarp * U;
            // One division per step: the U tokens are consecutive, so later ones just walk the page.
            int page = t0 / kv.pageSize;
            int slotInPage = t0 - page * kv.pageSize;
            page -= firstPage;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int t = t0 + u;
                const bool valid = t < kEnd;
                const KT* k = pool;
                if (valid) {
                    k = pool + pageBase[page] + slotInPage * kv.kvHeads * D + laneOffset;
                }
                if (++slotInPage == kv.pageSize) {
                    slotInPage = 0;
                    ++page;
                }
#pragma unroll
                for (int c = 0; c < CHUNKS; ++c) {
                    cp_async16(stage + (((u * 2 + 0) * CHUNKS + c) * 32 + lane) * 16, k + c * S::VEC, valid);
                    cp_async16(stage + (((u * 2 + 1) * CHUNKS + c) * 32 + lane) * 16,
                               valid ? k + pageElems + c * S::VEC : k, valid);
                }
            }
            cp_async_commit();
        };

#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < steps) issue(s);
        }
        for (int step = 0; step < steps; ++step) {
            if (step + STAGES - 1 < steps) {
                issue(step + STAGES - 1);
            } else {
                cp_async_commit();  // an empty group keeps "all but the newest STAGES-1" meaning this step
            }
            cp_async_wait<STAGES - 1>();
            const unsigned char* stage = warpStaging + (step % STAGES) * S::WARP_STAGE_BYTES;
            const int t0 = warpFirst + step * SLOTS * U + slotInWarp * U;

            float s[U][GH];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                float kf[EPL];
                load_staged<KT, EPL, CHUNKS>(stage + (u * 2 + 0) * CHUNKS * 32 * 16, lane, kf);
#pragma unroll
                for (int j = 0; j < GH; ++j) {
                    float d = 0.f;
#pragma unroll
                    for (int e = 0; e < EPL; ++e) d += qf[j][e] * kf[e];
#pragma unroll
                    for (int o = LPT / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
                    s[u][j] = t0 + u < kEnd ? d : -INFINITY;
                }
            }
            // Online softmax: rescale once per step, then turn the scores into weights.
#pragma unroll
            for (int j = 0; j < GH; ++j) {
                float mx = s[0][j];
#pragma unroll
                for (int u = 1; u < U; ++u) mx = fmaxf(mx, s[u][j]);
                const float mNew = fmaxf(m[j], mx);
                const float alpha = mNew == -INFINITY ? 1.f : exp2f(m[j] - mNew);
                l[j] *= alpha;
#pragma unroll
                for (int e = 0; e < EPL; ++e) acc[j][e] *= alpha;
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    s[u][j] = mNew == -INFINITY ? 0.f : exp2f(s[u][j] - mNew);
                    l[j] += s[u][j];
                }
                m[j] = mNew;
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                float vf[EPL];
                load_staged<KT, EPL, CHUNKS>(stage + (u * 2 + 1) * CHUNKS * 32 * 16, lane, vf);
#pragma unroll
                for (int j = 0; j < GH; ++j) {
#pragma unroll
                    for (int e = 0; e < EPL; ++e) acc[j][e] += s[u][j] * vf[e];
                }
            }
        }
        cp_async_wait<0>();
        __syncthreads();  // the combine below reuses the staging memory

#pragma unroll
        for (int j = 0; j < GH; ++j) {
#pragma unroll
            for (int e = 0; e < EPL; ++e) combine.acc[(slot * GH + j) * D + sub * EPL + e] = acc[j][e];
            if (sub == 0) {
                combine.m[slot * GH + j] = m[j];
                combine.l[slot * GH + j] = l[j];
            }
        }
        combine.finish(b, split, qoHeads, sliceStride, out, partialO, partialLse);
    }
    if (b.slices == 1) return;
    merge_slices<T, D, GH>(b, qoHeads, sliceStride, out, partialO, partialLse, splitDone, combine.m, &lastBlock);
}

// Tensor-core slices (bf16): keys are the 16 rows of the mma tiles and the GH heads (at most 8) columns of the
// 8-wide operand, so no row is padding. Per 16-key chunk a warp computes S^T = K Q^T (K through ldmatrix as
// the A operand, Q's B fragments loaded once) and O^T += V^T P^T (V through ldmatrix.trans as A; P^T's B
// fragment is S^T's accumulator packed to bf16 and transposed in registers by movmatrix), with the online
// softmax on the fp32 S^T fragment: a lane holds keys lane / 4 and + 8 of heads 2 (lane % 4) and + 1, the
// other keys of a head on the lanes of equal lane % 4. Each warp streams its own chunks of the slice through
// kTcStages cp.async stages (rows padded by 8 elements so that ldmatrix rows hit distinct banks) and is one
// softmax state (slot) of the combine.
template <int D>
struct TcDecodeShape {
    static constexpr int THREADS = kTcDecodeWarps * 32;
    static constexpr int STRIDE = D + 8;
    static constexpr int CHUNKS = D / 8;                        // 16-byte pieces of a row
    static constexpr int KEYS_PER_PASS = 32 / CHUNKS;           // rows one pass of the warp's copies covers
    static constexpr int STAGE_ELEMS = 2 * kTcDecodeKeys * STRIDE;  // K rows, then V rows
    static constexpr int STAGING_BYTES = kTcDecodeWarps * kTcDecodeStages * STAGE_ELEMS * 2;
    static_assert(D % 16 == 0 && 32 % CHUNKS == 0, "head dim must be a multiple of 16 and at most 256");
};

template <int D, int GH>
__device__ __forceinline__ void decode_mma_body(const __nv_bfloat16* q, PagedKv kv, Mask mask, const int* qoIndptr,
                                                int qoHeads, float smScale, int splits, int sliceStride,
                                                __nv_bfloat16* out, float* partialO, float* partialLse,
                                                int* splitDone) {
    using T = __nv_bfloat16;
    using S = TcDecodeShape<D>;
    using Combine = SliceCombine<D, GH, kTcDecodeWarps>;
    constexpr int KW = kTcDecodeKeys, STAGES = kTcDecodeStages, STRIDE = S::STRIDE;
    static_assert(GH <= 8, "the heads are the 8 columns of the B operand");
    static_assert(S::STAGING_BYTES >= Combine::BYTES, "the combine reuses the staging memory");

    unsigned char* smem = dynamic_smem();  // S::STAGING_BYTES (CudaAttention.tcDecodeSmemBytes)
    __shared__ long long pageBase[kSplitPages];
    __shared__ int lastBlock;

    // The step's plan (lengths, page table) is not written by the kernel before this one: read before the wait,
    // it overlaps that kernel when it releases this one early (qkv_rope_append does).
    const DecodeBlock b = DecodeBlock::of<GH>(kv, mask, qoIndptr, qoHeads, splits);
    if (!b.active) return;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int row = lane >> 2, quad = lane & 3;
    const int col0 = 2 * quad, col1 = 2 * quad + 1;  // the heads of this lane's accumulator columns

    // Q^T's B fragments: head lane / 4, dims 2 quad (+1) of each 16 and the same 8 on; zero past the GH heads.
    // Loaded after the wait, with the first slice's page table in hand.
    uint32_t qb[D / 16][2];
    const bool qValid = row < GH;
    const float scaleLog2 = smScale * kLog2e;
    const long long pageElems = (long long)kv.pageSize * kv.kvHeads * D;
    const T* head = static_cast<const T*>(kv.pool) + b.g * D;
    const int slotStride = kv.kvHeads * D;
    T* warpStaging = reinterpret_cast<T*>(smem) + warp * STAGES * S::STAGE_ELEMS;
    const Combine combine(smem);
    // ldmatrix lane addresses: K as A (keys lane % 16, dim half lane / 16); V^T as A through .trans (keys
    // lane % 8 + 8 (lane / 16), dim half (lane / 8) % 2).
    const int kRow = lane & 15, kCol = (lane >> 4) * 8;
    const int vRow = (lane & 7) + ((lane >> 4) << 3), vCol = ((lane >> 3) & 1) * 8;
    // Copies: lane owns 16-byte piece lane % CHUNKS of rows lane / CHUNKS, + KEYS_PER_PASS, ...
    const int copyRow = lane / S::CHUNKS, copyChunk = lane % S::CHUNKS;

    for (int split = blockIdx.x; split < b.slices; split += gridDim.x) {
        const int kBegin = b.lo + split * b.keys;
        const int kEnd = min(b.hi, kBegin + b.keys);
        const int firstPage = kBegin / kv.pageSize;
        __syncthreads();  // the previous slice's combine is done with the shared memory
        load_page_table(kv, b.r, kBegin, kEnd, pageElems, pageBase);
        if (split == blockIdx.x) {
            await_previous_kernel();
#pragma unroll
            for (int kd = 0; kd < D / 16; ++kd) {
                const uint32_t* src = reinterpret_cast<const uint32_t*>(
                    q + ((long long)b.qBegin * qoHeads + b.h0 + (qValid ? row : 0)) * D + kd * 16 + 2 * quad);
                qb[kd][0] = qValid ? src[0] : 0u;
                qb[kd][1] = qValid ? src[4] : 0u;
            }
        }
        __syncthreads();

        float o[D / 16][4];
#pragma unroll
        for (int n = 0; n < D / 16; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
        float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  // raw-score maxima; this lane's share of l

        const int warpFirst = kBegin + warp * KW;
        const int steps = warpFirst < kEnd ? (kEnd - warpFirst + kTcDecodeWarps * KW - 1) / (kTcDecodeWarps * KW) : 0;

        auto issue = [&](int step) {
            T* ks = warpStaging + (step % STAGES) * S::STAGE_ELEMS;
            T* vs = ks + KW * STRIDE;
            const int t0 = warpFirst + step * kTcDecodeWarps * KW + copyRow;
            int page = t0 / kv.pageSize;
            int slotInPage = t0 - page * kv.pageSize;
            page -= firstPage;
#pragma unroll
            for (int i = 0; i < KW / S::KEYS_PER_PASS; ++i) {
                const int j = copyRow + i * S::KEYS_PER_PASS;
                const bool valid = t0 + i * S::KEYS_PER_PASS < kEnd;  // keys past the slice are zero-filled
                const T* k = valid ? head + pageBase[page] + slotInPage * slotStride + copyChunk * 8 : head;
                cp_async16(ks + j * STRIDE + copyChunk * 8, k, valid);
                cp_async16(vs + j * STRIDE + copyChunk * 8, valid ? k + pageElems : k, valid);
                slotInPage += S::KEYS_PER_PASS;
                while (slotInPage >= kv.pageSize) {
                    slotInPage -= kv.pageSize;
                    ++page;
                }
            }
        };

#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < steps) issue(s);
            cp_async_commit();
        }
        for (int step = 0; step < steps; ++step) {
            if (step + STAGES - 1 < steps) issue(step + STAGES - 1);
            cp_async_commit();  // possibly empty: "all but the newest STAGES-1" is this step's chunk
            cp_async_wait<STAGES - 1>();
            __syncwarp();  // the chunk's rows were copied by every lane of the warp
            const T* ks = warpStaging + (step % STAGES) * S::STAGE_ELEMS;
            const uint32_t kAddr = smem_addr(ks + kRow * STRIDE + kCol);
            const uint32_t vAddr = smem_addr(ks + KW * STRIDE + vRow * STRIDE + vCol);

            // Two accumulator chains over the head dim halve the dependent mma latency of a 16-key tile.
            float sc[2][KW / 16][4] = {};
#pragma unroll
            for (int kd = 0; kd < D / 16; ++kd) {
#pragma unroll
                for (int mt = 0; mt < KW / 16; ++mt) {
                    uint32_t a[4];
                    ldmatrix_x4(a, kAddr + (mt * 16 * STRIDE + kd * 16) * 2);
                    mma_bf16(sc[kd & 1][mt], a, qb[kd][0], qb[kd][1]);
                }
            }
            const int t0 = warpFirst + step * kTcDecodeWarps * KW;
            float s[KW / 16][4];
            float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
            for (int mt = 0; mt < KW / 16; ++mt) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    s[mt][e] = t0 + mt * 16 + row + (e >> 1) * 8 < kEnd ? sc[0][mt][e] + sc[1][mt][e] : -INFINITY;
                }
                mx0 = fmaxf(mx0, fmaxf(s[mt][0], s[mt][2]));
                mx1 = fmaxf(mx1, fmaxf(s[mt][1], s[mt][3]));
            }
#pragma unroll
            for (int x = 4; x < 32; x <<= 1) {
                mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
                mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
            }
            // Finite: the chunk's first key is visible. Scores stay raw; the scale folds into one FMA per exp.
            const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
            const float base0 = n0 * scaleLog2, base1 = n1 * scaleLog2;
            const float alpha0 = fast_exp2(m0 * scaleLog2 - base0), alpha1 = fast_exp2(m1 * scaleLog2 - base1);
            m0 = n0;
            m1 = n1;
            float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
            for (int mt = 0; mt < KW / 16; ++mt) {
                s[mt][0] = fast_exp2(fmaf(s[mt][0], scaleLog2, -base0));
                s[mt][1] = fast_exp2(fmaf(s[mt][1], scaleLog2, -base1));
                s[mt][2] = fast_exp2(fmaf(s[mt][2], scaleLog2, -base0));
                s[mt][3] = fast_exp2(fmaf(s[mt][3], scaleLog2, -base1));
                sum0 += s[mt][0] + s[mt][2];
                sum1 += s[mt][1] + s[mt][3];
            }
            l0 = l0 * alpha0 + sum0;
            l1 = l1 * alpha1 + sum1;
#pragma unroll
            for (int n = 0; n < D / 16; ++n) {
                o[n][0] *= alpha0;
                o[n][1] *= alpha1;
                o[n][2] *= alpha0;
                o[n][3] *= alpha1;
            }
#pragma unroll
            for (int mt = 0; mt < KW / 16; ++mt) {
                const uint32_t pb0 = movmatrix_trans(pack_bf16(s[mt][0], s[mt][1]));  // keys 2 quad (+1)
                const uint32_t pb1 = movmatrix_trans(pack_bf16(s[mt][2], s[mt][3]));  // keys 8 + 2 quad (+1)
#pragma unroll
                for (int n = 0; n < D / 16; ++n) {
                    uint32_t a[4];
                    ldmatrix_x4_trans(a, vAddr + (mt * 16 * STRIDE + n * 16) * 2);
                    mma_bf16(o[n], a, pb0, pb1);
                }
            }
            __syncwarp();  // every lane is done with the chunk before its stage is refilled
        }
        cp_async_wait<0>();
#pragma unroll
        for (int x = 4; x < 32; x <<= 1) {
            l0 += __shfl_xor_sync(0xffffffffu, l0, x);
            l1 += __shfl_xor_sync(0xffffffffu, l1, x);
        }
        __syncthreads();  // the combine reuses the staging memory
        // O^T's fragment: dims 16 n + lane / 4 (c0, c1) and + 8 (c2, c3) of heads col0 (c0, c2) and col1.
#pragma unroll
        for (int n = 0; n < D / 16; ++n) {
            const int d = n * 16 + row;
            if (col0 < GH) {
                combine.acc[(warp * GH + col0) * D + d] = o[n][0];
                combine.acc[(warp * GH + col0) * D + d + 8] = o[n][2];
            }
            if (col1 < GH) {
                combine.acc[(warp * GH + col1) * D + d] = o[n][1];
                combine.acc[(warp * GH + col1) * D + d + 8] = o[n][3];
            }
        }
        if (row == 0) {
            if (col0 < GH) {
                combine.m[warp * GH + col0] = steps > 0 ? m0 * scaleLog2 : -INFINITY;
                combine.l[warp * GH + col0] = l0;
            }
            if (col1 < GH) {
                combine.m[warp * GH + col1] = steps > 0 ? m1 * scaleLog2 : -INFINITY;
                combine.l[warp * GH + col1] = l1;
            }
        }
        combine.finish(b, split, qoHeads, sliceStride, out, partialO, partialLse);
    }
    if (b.slices == 1) return;
    merge_slices<T, D, GH>(b, qoHeads, sliceStride, out, partialO, partialLse, splitDone, combine.m, &lastBlock);
}

}  // namespace

// Up to four query heads per block, registers are capped at what lets four blocks share an SM (128 per
// thread; the compiler would otherwise take ~167 for the slice loop and fit three); eight heads need more.
#define MSTAR_DECODE(NAME, T, KT, D, GH)                                                                        \
    extern "C" __global__ void __launch_bounds__(kDecodeWarps * 32, GH <= 4 ? 4 : 1)                            \
        NAME(const T* q, const void* pool, const int* qoIndptr, const int* kvIndptr, const int* kvIndices,     \
             const int* lastPageLen, int layer, int numPages, int pageSize, int qoHeads, int kvHeads, int causal, \
             int windowLeft, int contextOnly, float smScale, int splits, int sliceStride, T* out,              \
             float* partialO, float* partialLse, int* splitDone) {                                             \
        mstar::await_previous_kernel();                                                                        \
        decode_body<T, KT, D, GH>(q, PagedKv{pool, kvIndptr, kvIndices, lastPageLen, layer, numPages, pageSize, kvHeads}, \
                              Mask{causal, windowLeft, contextOnly}, qoIndptr, qoHeads, smScale, splits, sliceStride, \
                              out, partialO, partialLse, splitDone);                                           \
    }

#define MSTAR_DECODE_GROUPS(TN, T, D)           \
    MSTAR_DECODE(attn_decode_##TN##_d##D##_g1, T, T, D, 1) \
    MSTAR_DECODE(attn_decode_##TN##_d##D##_g2, T, T, D, 2) \
    MSTAR_DECODE(attn_decode_##TN##_d##D##_g4, T, T, D, 4) \
    MSTAR_DECODE(attn_decode_##TN##_d##D##_g8, T, T, D, 8)

// FP8 (E4M3) pools under bf16 queries. A lane widens 16 codes (one 16-byte copy), twice a bf16 lane's 8, so a block
// holds twice the softmax states; at eight heads their combine would outgrow the 48 KB of static shared memory, so
// at most four heads share a block (CudaAttention.FP8_DECODE_MAX_HEADS): a group of eight takes two blocks.
#define MSTAR_DECODE_E4M3_GROUPS(D)                                              \
    MSTAR_DECODE(attn_decode_e4m3_d##D##_g1, __nv_bfloat16, E4m3, D, 1) \
    MSTAR_DECODE(attn_decode_e4m3_d##D##_g2, __nv_bfloat16, E4m3, D, 2) \
    MSTAR_DECODE(attn_decode_e4m3_d##D##_g4, __nv_bfloat16, E4m3, D, 4)

MSTAR_DECODE_GROUPS(f32, float, 32)
MSTAR_DECODE_GROUPS(f32, float, 64)
MSTAR_DECODE_GROUPS(f32, float, 128)
MSTAR_DECODE_GROUPS(f32, float, 256)
MSTAR_DECODE_GROUPS(bf16, __nv_bfloat16, 32)
MSTAR_DECODE_GROUPS(bf16, __nv_bfloat16, 64)
MSTAR_DECODE_GROUPS(bf16, __nv_bfloat16, 128)
MSTAR_DECODE_GROUPS(bf16, __nv_bfloat16, 256)
MSTAR_DECODE_E4M3_GROUPS(32)
MSTAR_DECODE_E4M3_GROUPS(64)
MSTAR_DECODE_E4M3_GROUPS(128)
MSTAR_DECODE_E4M3_GROUPS(256)

// Dynamic shared memory: TcDecodeShape<D>::STAGING_BYTES. Four blocks per SM bound the registers at 170.
#define MSTAR_DECODE_TC(D, GH)                                                                                  \
    extern "C" __global__ void __launch_bounds__(kTcDecodeWarps * 32, 4) attn_decode_tc_bf16_d##D##_g##GH(        \
        const __nv_bfloat16* q, const void* pool, const int* qoIndptr, const int* kvIndptr, const int* kvIndices,   \
        const int* lastPageLen, int layer, int numPages, int pageSize, int qoHeads, int kvHeads, int causal,        \
        int windowLeft, int contextOnly, float smScale, int splits, int sliceStride, __nv_bfloat16* out,            \
        float* partialO, float* partialLse, int* splitDone) {                                                     \
        decode_mma_body<D, GH>(q, PagedKv{pool, kvIndptr, kvIndices, lastPageLen, layer, numPages, pageSize, kvHeads}, \
                               Mask{causal, windowLeft, contextOnly}, qoIndptr, qoHeads, smScale, splits, sliceStride, \
                               out, partialO, partialLse, splitDone);                                            \
    }

#define MSTAR_DECODE_TC_GROUPS(D) \
    MSTAR_DECODE_TC(D, 1) MSTAR_DECODE_TC(D, 2) MSTAR_DECODE_TC(D, 4) MSTAR_DECODE_TC(D, 8)

MSTAR_DECODE_TC_GROUPS(64)
MSTAR_DECODE_TC_GROUPS(128)
