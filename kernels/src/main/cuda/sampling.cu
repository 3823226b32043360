// Greedy pick, the sampling pipeline (penalty → softmax → min-p → top-k/top-p → stop ids) and the
// canonical draw from probabilities (ProbabilitySampler + Philox, bit-exact with the CPU reference).
#include <limits.h>

#include "common.cuh"

using namespace mstar;

namespace {

constexpr int kSampleBlock = 256;  // ProbabilitySampler.BLOCK

// Elements per thread whose loads are issued together before any is used. A loop that loads, uses and stores one
// element at a time waits a full memory round trip per element: the next load cannot move above the store.
constexpr int kBatch = 8;
// sampling_probs' first pass (all a greedy row reads) holds little besides its loads, so twice as many fit there.
constexpr int kFirstPassBatch = 16;
// apply_cut's chunks per pass: its ballots and ranks would not fit the 64 registers of a 1024-thread block at kBatch.
constexpr int kCutBatch = 4;

// Calls body(v, x) with x = src[v] for this thread's elements v = threadIdx.x + i * blockDim.x, in increasing v
// (so per-thread sums keep their order). body may store to src[v].
template <class Body>
__device__ __forceinline__ void for_each_strided(const float* src, int vocab, Body body) {
    const int stride = blockDim.x;
    for (int v0 = threadIdx.x; v0 < vocab; v0 += kBatch * stride) {
        float x[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
            const int v = v0 + u * stride;
            x[u] = v < vocab ? src[v] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
            const int v = v0 + u * stride;
            if (v < vocab) body(v, x[u]);
        }
    }
}

__device__ __forceinline__ void arg_better(float& bv, int& bi, float v, int i) {
    if (v > bv || (v == bv && i < bi)) {
        bv = v;
        bi = i;
    }
}

// Largest value, lowest index on ties; every thread gets the result.
__device__ void block_argmax(float& v, int& i, float* sv, int* si) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
        const int oi = __shfl_xor_sync(0xffffffffu, i, o);
        arg_better(v, i, ov, oi);
    }
    __syncthreads();
    if (lane == 0) {
        sv[warp] = v;
        si[warp] = i;
    }
    __syncthreads();
    v = lane < warps ? sv[lane] : -INFINITY;
    i = lane < warps ? si[lane] : INT_MAX;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
        const int oi = __shfl_xor_sync(0xffffffffu, i, o);
        arg_better(v, i, ov, oi);
    }
}

// Philox-4x32-10, first output word, exactly as org.mstar.device.Philox.
__device__ __forceinline__ uint32_t philox_first(uint64_t seed, uint64_t offset) {
    uint32_t c0 = (uint32_t)offset, c1 = (uint32_t)(offset >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    return c0;
}

// Probability mass in 2^-40 units: integer sums are exact, so the top-p cut does not depend on the
// reduction order (fp32 sums would make the kept set depend on the launch shape near ties).
__device__ __forceinline__ unsigned long long fixed_mass(float p) {
    return (unsigned long long)((double)p * 1099511627776.0);
}

struct CountMass {
    unsigned long long count;
    unsigned long long mass;
};

__device__ CountMass block_count_mass(CountMass v, unsigned long long* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v.count += __shfl_xor_sync(0xffffffffu, v.count, o);
        v.mass += __shfl_xor_sync(0xffffffffu, v.mass, o);
    }
    __syncthreads();
    if (lane == 0) {
        scratch[2 * warp] = v.count;
        scratch[2 * warp + 1] = v.mass;
    }
    __syncthreads();
    v.count = lane < warps ? scratch[2 * lane] : 0;
    v.mass = lane < warps ? scratch[2 * lane + 1] : 0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v.count += __shfl_xor_sync(0xffffffffu, v.count, o);
        v.mass += __shfl_xor_sync(0xffffffffu, v.mass, o);
    }
    return v;
}

// Count and mass of the elements whose bit pattern is >= t (non-negative floats order like their bits).
__device__ CountMass count_mass_at_least(const float* p, int vocab, uint32_t t, unsigned long long* scratch) {
    CountMass cm{0, 0};
    for_each_strided(p, vocab, [&](int, float q) {
        if (__float_as_uint(q) >= t) {
            cm.count++;
            cm.mass += fixed_mass(q);
        }
    });
    return block_count_mass(cm, scratch);
}

// A prefix of the order (probability descending, index ascending): every element above t, then the
// first `need` elements equal to t by index.
struct Cut {
    uint32_t t;
    unsigned long long need;
    unsigned long long countAbove;
    unsigned long long massAbove;
};

// Completes a cut at threshold t: count and mass strictly above it.
__device__ Cut cut_at(const float* p, int vocab, uint32_t t, unsigned long long* scratch) {
    const CountMass above = t == 0xFFFFFFFFu ? CountMass{0, 0} : count_mass_at_least(p, vocab, t + 1, scratch);
    return Cut{t, 0, above.count, above.mass};
}

// The first k elements of the order. Builds the largest t with count(>= t) >= k bit by bit.
__device__ Cut cut_by_count(const float* p, int vocab, unsigned long long k, unsigned long long* scratch) {
    uint32_t t = 0;
    for (int bit = 30; bit >= 0; --bit) {
        const uint32_t cand = t | (1u << bit);
        if (count_mass_at_least(p, vocab, cand, scratch).count >= k) t = cand;
    }
    Cut c = cut_at(p, vocab, t, scratch);
    c.need = k - c.countAbove;
    return c;
}

// The shortest prefix whose mass reaches target (in fixed_mass units, 0 < target <= total).
__device__ Cut cut_by_mass(const float* p, int vocab, unsigned long long target, unsigned long long* scratch) {
    uint32_t t = 0;
    for (int bit = 30; bit >= 0; --bit) {
        const uint32_t cand = t | (1u << bit);
        if (count_mass_at_least(p, vocab, cand, scratch).mass >= target) t = cand;
    }
    Cut c = cut_at(p, vocab, t, scratch);
    const unsigned long long unit = fixed_mass(__uint_as_float(t));
    const unsigned long long missing = target > c.massAbove ? target - c.massAbove : 0;
    c.need = unit == 0 ? 1 : (missing + unit - 1) / unit;
    if (c.need == 0) c.need = 1;
    return c;
}

__device__ __forceinline__ unsigned long long cut_size(const Cut& c) { return c.countAbove + c.need; }

// Zeroes everything outside the cut; returns the kept sum (fp32) and whether any nonzero element went.
// Ties are ranked by index with a block-wide scan over consecutive chunks of blockDim elements, kCutBatch chunks per
// pass so their loads are in flight together. warpTies holds kCutBatch * 32 counts.
__device__ float apply_cut(float* p, int vocab, const Cut& c, float* fscratch, unsigned* warpTies, bool& removed) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    const int stride = blockDim.x;
    float kept = 0.f;
    bool dropped = false;
    unsigned long long tiesBefore = 0;
    for (int chunk0 = 0; chunk0 < vocab; chunk0 += kCutBatch * stride) {
        float q[kCutBatch];
        unsigned ballot[kCutBatch];
#pragma unroll
        for (int u = 0; u < kCutBatch; ++u) {
            const int v = chunk0 + u * stride + threadIdx.x;
            q[u] = v < vocab ? p[v] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < kCutBatch; ++u) {
            const int v = chunk0 + u * stride + threadIdx.x;
            ballot[u] = __ballot_sync(0xffffffffu, v < vocab && __float_as_uint(q[u]) == c.t);
            if (lane == 0) warpTies[u * 32 + warp] = __popc(ballot[u]);
        }
        __syncthreads();
#pragma unroll
        for (int u = 0; u < kCutBatch; ++u) {
            const int v = chunk0 + u * stride + threadIdx.x;
            unsigned long long rank = tiesBefore + __popc(ballot[u] & ((1u << lane) - 1u));
            unsigned chunkTies = 0;
            for (int w = 0; w < warps; ++w) {
                if (w < warp) rank += warpTies[u * 32 + w];
                chunkTies += warpTies[u * 32 + w];
            }
            if (v < vocab) {
                const uint32_t bits = __float_as_uint(q[u]);
                const bool keep = bits > c.t || (bits == c.t && rank < c.need);
                dropped |= !keep && q[u] > 0.f;
                const float out = keep ? q[u] : 0.f;
                p[v] = out;
                kept += out;
            }
            tiesBefore += chunkTies;
        }
        __syncthreads();
    }
    removed = __syncthreads_or(dropped) != 0;
    return block_sum(kept, fscratch);
}

// A row whose mass is all gone stays zero rather than becoming NaN.
__device__ void divide_row(float* p, int vocab, float by) {
    if (by <= 0.f) return;
    for_each_strided(p, vocab, [&](int v, float x) { p[v] = x / by; });
}

// sample_from_probs: the warps that sum token blocks (all of a 256-thread block; further warps leave it to these),
// and how many values one thread loads ahead of its sequential adds.
constexpr int kSumWarps = 8;
constexpr int kScan = 16;

#ifndef MSTAR_HOST_EMULATION  // kernels/emulation provides the host version
// sample_from_probs' dynamic shared memory: the sums of the row's token blocks.
__device__ __forceinline__ float* token_block_sum_smem() {
    extern __shared__ float blockSum[];
    return blockSum;
}
#endif

// Sums of the row's token blocks, each in token order: lane i of warp w sums token block 32 g + i for the groups
// g = w, w + sumWarps, ... (a thread reading its own block alone would make each warp load touch 32 lines).
// The warp reads 32 floats of each of its 32 blocks coalesced, 64 loads in flight per lane, and passes them
// through its tile (padded, so neither the writes nor the reads conflict) so that every lane gets its own block's.
__device__ void token_block_sums(const float* __restrict__ p, int vocab, int blocks, float* blockSum,
                                 float (*tile)[33]) {
    const int lane = threadIdx.x & 31, sumWarps = min((int)blockDim.x >> 5, kSumWarps);
    for (int g = threadIdx.x >> 5; g * 32 < blocks; g += sumWarps) {
        const int firstBlock = g * 32;
        const int start = (firstBlock + lane) * kSampleBlock, end = min(vocab, start + kSampleBlock);
        float s = 0.f;
        for (int c0 = 0; c0 < kSampleBlock; c0 += 64) {
            float x[2][32];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
#pragma unroll
                for (int j = 0; j < 32; ++j) {
                    const int idx = (firstBlock + j) * kSampleBlock + c0 + h * 32 + lane;
                    x[h][j] = idx < vocab ? p[idx] : 0.f;
                }
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
#pragma unroll
                for (int j = 0; j < 32; ++j) tile[j][lane] = x[h][j];
                __syncwarp();
                const int from = start + c0 + h * 32;
#pragma unroll
                for (int i = 0; i < 32; ++i) {
                    if (from + i < end) s += tile[lane][i];
                }
                __syncwarp();
            }
        }
        if (firstBlock + lane < blocks) blockSum[firstBlock + lane] = s;
    }
}

// s + v[0] + ... + v[n - 1], added in index order.
__device__ float sum_in_order(const float* v, int n, float s) {
    for (int i0 = 0; i0 < n; i0 += kScan) {
        float x[kScan];
#pragma unroll
        for (int k = 0; k < kScan; ++k) x[k] = i0 + k < n ? v[i0 + k] : 0.f;
#pragma unroll
        for (int k = 0; k < kScan; ++k) {
            if (i0 + k < n) s += x[k];
        }
    }
    return s;
}

// The first nonempty token block at which the running sum of the block sums passes target, else the last
// nonempty one, else -1; cum becomes the sum of the blocks before it.
__device__ int pick_block(const float* blockSum, int blocks, float target, float& cum) {
    cum = 0.f;
    int lastNonEmpty = -1;
    for (int b0 = 0; b0 < blocks; b0 += kScan) {
        float x[kScan];
#pragma unroll
        for (int k = 0; k < kScan; ++k) x[k] = b0 + k < blocks ? blockSum[b0 + k] : 0.f;
#pragma unroll
        for (int k = 0; k < kScan; ++k) {
            if (b0 + k >= blocks) break;
            if (x[k] > 0.f) {
                lastNonEmpty = b0 + k;
                if (cum + x[k] > target) return b0 + k;
            }
            cum += x[k];
        }
    }
    if (lastNonEmpty >= 0) cum = sum_in_order(blockSum, lastNonEmpty, 0.f);
    return lastNonEmpty;
}

// Inside the chosen block (q: its n probabilities, token ids from first): the first positive token at which the
// running sum from c passes target, else the last positive one.
__device__ int pick_token(const float* q, int n, int first, float c, float target) {
    int lastPositive = -1;
    for (int i0 = 0; i0 < n; i0 += kScan) {
        float x[kScan];
#pragma unroll
        for (int k = 0; k < kScan; ++k) x[k] = i0 + k < n ? q[i0 + k] : 0.f;
#pragma unroll
        for (int k = 0; k < kScan; ++k) {
            if (i0 + k >= n) break;
            c += x[k];
            if (x[k] > 0.f) {
                lastPositive = first + i0 + k;
                if (c > target) return lastPositive;
            }
        }
    }
    return lastPositive;
}

}  // namespace

namespace {

constexpr int kArgmaxThreads = 256;
constexpr int kArgmaxPerThread = 16;

__device__ __forceinline__ float as_float(float v) { return v; }
__device__ __forceinline__ float as_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float as_float(__half v) { return __half2float(v); }

// This thread's best of elements [begin, end) of row, every load issued before the first comparison.
template <typename T>
__device__ __forceinline__ void chunk_argmax(const T* row, int begin, int end, float& best, int& bestIdx) {
    float x[kArgmaxPerThread];
#pragma unroll
    for (int u = 0; u < kArgmaxPerThread; ++u) {
        const int v = begin + u * kArgmaxThreads + threadIdx.x;
        x[u] = v < end ? as_float(row[v]) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kArgmaxPerThread; ++u) {
        const int v = begin + u * kArgmaxThreads + threadIdx.x;
        if (v < end) arg_better(best, bestIdx, x[u], v);
    }
}

}  // namespace

// out[r] = argmax(logits[r, :]), lowest index on ties (NaN never wins). Block (c, r) takes chunk c of row r
// (kArgmaxThreads · kArgmaxPerThread elements): one block per row left the memory idle at a few rows (16 rows
// of a 128k vocabulary read at 0.3 TB/s). Each block stores its chunk's best in partialValue / partialIndex,
// and the block that counts its row's last chunk in done (and resets it to zero) takes the best of them.
// Grid: (ceil(vocab / chunk), rows) blocks of kArgmaxThreads threads; CudaOps.ARGMAX_CHUNK equals the chunk.
extern "C" __global__ void __launch_bounds__(kArgmaxThreads)
    argmax_rows(const void* logits, int dt, int* out, int vocab, float* partialValue, int* partialIndex, int* done) {
    mstar::await_previous_kernel();
    __shared__ float sv[32];
    __shared__ int si[32];
    __shared__ bool lastBlock;
    const int r = blockIdx.y, chunks = gridDim.x;
    const long long base = (long long)r * vocab;
    const int begin = blockIdx.x * kArgmaxThreads * kArgmaxPerThread;
    const int end = min(vocab, begin + kArgmaxThreads * kArgmaxPerThread);
    float best = -INFINITY;
    int bestIdx = INT_MAX;
    switch (dt) {
        case DT_BF16: chunk_argmax(static_cast<const __nv_bfloat16*>(logits) + base, begin, end, best, bestIdx); break;
        case DT_F16: chunk_argmax(static_cast<const __half*>(logits) + base, begin, end, best, bestIdx); break;
        default: chunk_argmax(static_cast<const float*>(logits) + base, begin, end, best, bestIdx); break;
    }
    block_argmax(best, bestIdx, sv, si);
    if (chunks == 1) {
        if (threadIdx.x == 0) out[r] = bestIdx == INT_MAX ? 0 : bestIdx;
        return;
    }
    if (threadIdx.x == 0) {
        partialValue[(long long)r * chunks + blockIdx.x] = best;
        partialIndex[(long long)r * chunks + blockIdx.x] = bestIdx;
        __threadfence();  // the partial is visible device-wide before this block is counted
        lastBlock = atomicAdd(done + r, 1) == chunks - 1;
        if (lastBlock) done[r] = 0;  // every other block has counted: ready for the next launch
    }
    __syncthreads();
    if (!lastBlock) return;
    __threadfence();
    best = -INFINITY;
    bestIdx = INT_MAX;
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
        arg_better(best, bestIdx, __ldcg(partialValue + (long long)r * chunks + c),
                   __ldcg(partialIndex + (long long)r * chunks + c));
    }
    block_argmax(best, bestIdx, sv, si);
    if (threadIdx.x == 0) out[r] = bestIdx == INT_MAX ? 0 : bestIdx;
}

// Steps 1-6 of SamplingBatch for one row per block (blockDim = 1024). probs doubles as the row's scratch:
// every pass reads and writes the same elements from the same thread, so passes need no extra barrier.
// Null parameter tensors take the neutral value (no penalty, no top-k, top-p 1, min-p 0, min-keep 1).
extern "C" __global__ void __launch_bounds__(1024)
    sampling_probs(const float* logits, float* probs, int vocab, const float* temperature, const int* topK,
                   const float* topP, const float* minP, const float* repPenalty, const float* penaltyCounts,
                   const int* topPFirst, const int* topPMinKeep, const int* maskStopIds, const int* stopIds,
                   int numStopIds, int applyFilters) {
    mstar::await_previous_kernel();
    __shared__ float fscratch[32];
    __shared__ int iscratch[32];
    __shared__ unsigned warpTies[kCutBatch * 32];
    __shared__ unsigned long long cmScratch[64];
    const int r = blockIdx.x;
    const long long base = (long long)r * vocab;
    const float* l = logits + base;
    float* p = probs + base;
    const float temp = temperature[r];
    const float pen = repPenalty != nullptr ? repPenalty[r] : 1.f;
    const float* counts = penaltyCounts != nullptr && pen != 1.f ? penaltyCounts + base : nullptr;

    // A greedy row whose stop ids are held back takes its argmax among the other tokens: masking the
    // one-hot afterwards would leave it no mass at all.
    const bool greedyMasked = temp == 0.f && maskStopIds != nullptr && maskStopIds[r] != 0 && stopIds != nullptr;
    // 1. repetition penalty; the penalised logits stay in p (a greedy row only needs their argmax: its p becomes
    // the one-hot).
    float best = -INFINITY;
    int bestIdx = INT_MAX;
    const int stride = blockDim.x;
    for (int v0 = threadIdx.x; v0 < vocab; v0 += kFirstPassBatch * stride) {
        float x[kFirstPassBatch], n[kFirstPassBatch];
#pragma unroll
        for (int u = 0; u < kFirstPassBatch; ++u) {
            const int v = v0 + u * stride;
            x[u] = v < vocab ? l[v] : 0.f;
            n[u] = counts != nullptr && v < vocab ? counts[v] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < kFirstPassBatch; ++u) {
            const int v = v0 + u * stride;
            if (v >= vocab) break;
            if (n[u] > 0.f) {
                const float f = n[u] == 1.f ? pen : powf(pen, n[u]);
                x[u] = x[u] > 0.f ? x[u] / f : x[u] * f;
            }
            if (temp != 0.f) p[v] = x[u];
            bool held = false;
            if (greedyMasked) {
                for (int j = 0; j < numStopIds; ++j) held |= stopIds[j] == v;
            }
            if (!held) arg_better(best, bestIdx, x[u], v);
        }
    }
    block_argmax(best, bestIdx, fscratch, iscratch);

    if (temp == 0.f) {
        // 2. greedy: one-hot at the argmax. Min-p and the filters keep a one-hot unchanged.
        for (int v = threadIdx.x; v < vocab; v += blockDim.x) p[v] = v == bestIdx ? 1.f : 0.f;
    } else {
        // 2. softmax(l / T); dividing by T > 0 is monotone, so max(l / T) = max(l) / T.
        const float m = best / temp;
        float sum = 0.f;
        for_each_strided(p, vocab, [&](int v, float x) {
            const float e = expf(x / temp - m);
            p[v] = e;
            sum += e;
        });
        sum = block_sum(sum, fscratch);
        float pmax = 0.f;
        for_each_strided(p, vocab, [&](int v, float x) {
            const float q = x / sum;
            p[v] = q;
            pmax = fmaxf(pmax, q);
        });
        // 3. min-p against the largest probability, then renormalise.
        const float mp = minP != nullptr ? minP[r] : 0.f;
        if (mp > 0.f) {
            pmax = block_max(pmax, fscratch);
            const float floor = mp * pmax;
            float kept = 0.f;
            bool dropped = false;
            for_each_strided(p, vocab, [&](int v, float q) {
                if (q > 0.f && q < floor) {
                    q = 0.f;
                    dropped = true;
                }
                p[v] = q;
                kept += q;
            });
            kept = block_sum(kept, fscratch);
            // A filter that removes nothing leaves the row bit for bit, as on the CPU.
            if (__syncthreads_or(dropped)) divide_row(p, vocab, kept);
        }
        // 4. top-k / top-p. Both keep a prefix of one order, so the result is the shorter prefix:
        // top-k first: min(k, max(topP prefix of the top-k set, minKeep)); top-p first: the same with the
        // top-p prefix taken over the full distribution.
        const int kRaw = applyFilters && topK != nullptr ? topK[r] : 0;
        const float tp = applyFilters && topP != nullptr ? topP[r] : 1.f;
        const unsigned long long k = kRaw > 0 && kRaw < vocab ? (unsigned long long)kRaw : (unsigned long long)vocab;
        const bool useK = k < (unsigned long long)vocab;
        const bool useP = tp < 1.f;
        if (useK || useP) {
            Cut cut;
            if (!useP) {
                cut = cut_by_count(p, vocab, k, cmScratch);
            } else {
                const bool kFirst = topPFirst == nullptr || topPFirst[r] == 0;
                const unsigned long long minKeep =
                    topPMinKeep != nullptr && topPMinKeep[r] > 0 ? (unsigned long long)topPMinKeep[r] : 1ull;
                Cut kCut{};
                unsigned long long pool;
                if (useK && kFirst) {
                    kCut = cut_by_count(p, vocab, k, cmScratch);
                    pool = kCut.massAbove + kCut.need * fixed_mass(__uint_as_float(kCut.t));
                } else {
                    pool = count_mass_at_least(p, vocab, 0u, cmScratch).mass;
                }
                const unsigned long long target = (unsigned long long)ceil((double)tp * (double)pool);
                if (target == 0) {
                    cut = Cut{0u, (unsigned long long)vocab, 0, 0};  // nothing to sample from: leave the row
                } else {
                    const Cut pCut = cut_by_mass(p, vocab, target, cmScratch);
                    unsigned long long c = cut_size(pCut);
                    if (c < minKeep) c = minKeep;
                    if (c > k) c = k;
                    if (c == cut_size(pCut)) cut = pCut;
                    else if (useK && kFirst && c == k) cut = kCut;
                    else cut = cut_by_count(p, vocab, c, cmScratch);
                }
            }
            bool removed;
            const float kept = apply_cut(p, vocab, cut, fscratch, warpTies, removed);
            if (removed) divide_row(p, vocab, kept);
        }
    }
    // 5. stop ids (not renormalised: the draw normalises).
    if (maskStopIds != nullptr && maskStopIds[r] != 0 && stopIds != nullptr) {
        __syncthreads();
        for (int j = threadIdx.x; j < numStopIds; j += blockDim.x) {
            const int id = stopIds[j];
            if (id >= 0 && id < vocab) p[id] = 0.f;
        }
    }
}

// Step 7, one row per block: the ProbabilitySampler rule with u from Philox(seeds[r], offsets[r]).
// Block sums (256 tokens each, summed sequentially) go to shared memory; one thread then follows the
// exact sequential rule so every fp32 addition happens in the CPU's order. Dynamic shared memory:
// ceil(vocab / 256) floats. blockDim is a multiple of 32 (256 from CudaOps).
extern "C" __global__ void sample_from_probs(const float* __restrict__ probs, const long long* seeds,
                                             const long long* offsets, int* out, int vocab) {
    mstar::await_previous_kernel();
    __shared__ float tiles[kSumWarps][32][33];
    __shared__ float chosenBlock[kSampleBlock];
    float* blockSum = token_block_sum_smem();
    const int r = blockIdx.x;
    const float* p = probs + (long long)r * vocab;
    const int blocks = (vocab + kSampleBlock - 1) / kSampleBlock;
    if (threadIdx.x < kSumWarps * 32) token_block_sums(p, vocab, blocks, blockSum, tiles[threadIdx.x >> 5]);
    __syncthreads();
    if (threadIdx.x >= 32) return;

    // Lane 0 follows the rule; warp 0 stages the chosen token block for it in one coalesced read.
    const int lane = threadIdx.x;
    int chosen = -1;
    float cum = 0.f, target = 0.f;
    if (lane == 0) {
        const float u = (float)(philox_first((uint64_t)seeds[r], (uint64_t)offsets[r]) >> 8) * 0x1p-24f;
        target = u * sum_in_order(blockSum, blocks, 0.f);
        chosen = pick_block(blockSum, blocks, target, cum);
    }
    chosen = __shfl_sync(0xffffffffu, chosen, 0);
    if (chosen < 0) {
        if (lane == 0) out[r] = 0;
        return;
    }
    const int first = chosen * kSampleBlock, n = min(vocab - first, kSampleBlock);
    float x[kSampleBlock / 32];
#pragma unroll
    for (int k = 0; k < kSampleBlock / 32; ++k) x[k] = k * 32 + lane < n ? p[first + k * 32 + lane] : 0.f;
#pragma unroll
    for (int k = 0; k < kSampleBlock / 32; ++k) chosenBlock[k * 32 + lane] = x[k];
    __syncwarp();
    if (lane == 0) out[r] = pick_token(chosenBlock, n, first, cum, target);
}

// Structured output: logits of tokens whose bit in the row's allowed mask is clear become -inf, in place.
// One thread per (row, token); grid (ceil(vocab / blockDim), rows).
extern "C" __global__ void mask_logits(float* logits, const unsigned* allowed, int vocab, int words) {
    mstar::await_previous_kernel();
    const int r = blockIdx.y;
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= vocab) return;
    const unsigned w = allowed[(long long)r * words + (v >> 5)];
    if (((w >> (v & 31)) & 1u) == 0u) logits[(long long)r * vocab + v] = -INFINITY;
}
