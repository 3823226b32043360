// The sampling kernels as they were before their loops were batched (kernels/src/main/cuda/sampling.cu at commit
// 6589264), kept as the reference sampling_checks.cpp compares the current ones with bit for bit. Only change: the
// dynamic shared memory comes from token_block_sum_smem(), as emulation cannot declare an extern __shared__ array.
// Greedy pick, the sampling pipeline (penalty → softmax → min-p → top-k/top-p → stop ids) and the
// canonical draw from probabilities (ProbabilitySampler + Philox, bit-exact with the CPU reference).
#include <limits.h>

#include "common.cuh"

using namespace mstar;

namespace {

constexpr int kSampleBlock = 256;  // ProbabilitySampler.BLOCK

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
    for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
        const float q = p[v];
        if (__float_as_uint(q) >= t) {
            cm.count++;
            cm.mass += fixed_mass(q);
        }
    }
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
// Ties are ranked by index with a block-wide scan over consecutive chunks of blockDim elements.
__device__ float apply_cut(float* p, int vocab, const Cut& c, float* fscratch, unsigned* warpTies, bool& removed) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    float kept = 0.f;
    bool dropped = false;
    unsigned long long tiesBefore = 0;
    for (int chunk = 0; chunk < vocab; chunk += blockDim.x) {
        const int v = chunk + threadIdx.x;
        const float q = v < vocab ? p[v] : 0.f;
        const uint32_t bits = __float_as_uint(q);
        const bool tie = v < vocab && bits == c.t;
        const unsigned ballot = __ballot_sync(0xffffffffu, tie);
        if (lane == 0) warpTies[warp] = __popc(ballot);
        __syncthreads();
        unsigned long long rank = tiesBefore + __popc(ballot & ((1u << lane) - 1u));
        unsigned chunkTies = 0;
        for (int w = 0; w < warps; ++w) {
            if (w < warp) rank += warpTies[w];
            chunkTies += warpTies[w];
        }
        if (v < vocab) {
            const bool keep = bits > c.t || (tie && rank < c.need);
            dropped |= !keep && q > 0.f;
            const float out = keep ? q : 0.f;
            p[v] = out;
            kept += out;
        }
        tiesBefore += chunkTies;
        __syncthreads();
    }
    removed = __syncthreads_or(dropped) != 0;
    return block_sum(kept, fscratch);
}

// A row whose mass is all gone stays zero rather than becoming NaN.
__device__ void divide_row(float* p, int vocab, float by) {
    if (by <= 0.f) return;
    for (int v = threadIdx.x; v < vocab; v += blockDim.x) p[v] = p[v] / by;
}

}  // namespace

// out[r] = argmax(logits[r, :]), lowest index on ties. One block per row.
extern "C" __global__ void argmax_rows(const void* logits, int dt, int* out, int vocab) {
    mstar::await_previous_kernel();
    __shared__ float sv[32];
    __shared__ int si[32];
    const long long base = (long long)blockIdx.x * vocab;
    float best = -INFINITY;
    int bestIdx = INT_MAX;
    for (int v = threadIdx.x; v < vocab; v += blockDim.x) arg_better(best, bestIdx, load_f(logits, dt, base + v), v);
    block_argmax(best, bestIdx, sv, si);
    if (threadIdx.x == 0) out[blockIdx.x] = bestIdx == INT_MAX ? 0 : bestIdx;
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
    __shared__ unsigned warpTies[32];
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
    // 1. repetition penalty; the penalised logits stay in p.
    float best = -INFINITY;
    int bestIdx = INT_MAX;
    for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
        float x = l[v];
        if (counts != nullptr) {
            const float n = counts[v];
            if (n > 0.f) {
                const float f = n == 1.f ? pen : powf(pen, n);
                x = x > 0.f ? x / f : x * f;
            }
        }
        p[v] = x;
        bool held = false;
        if (greedyMasked) {
            for (int j = 0; j < numStopIds; ++j) held |= stopIds[j] == v;
        }
        if (!held) arg_better(best, bestIdx, x, v);
    }
    block_argmax(best, bestIdx, fscratch, iscratch);

    if (temp == 0.f) {
        // 2. greedy: one-hot at the argmax. Min-p and the filters keep a one-hot unchanged.
        for (int v = threadIdx.x; v < vocab; v += blockDim.x) p[v] = v == bestIdx ? 1.f : 0.f;
    } else {
        // 2. softmax(l / T); dividing by T > 0 is monotone, so max(l / T) = max(l) / T.
        const float m = best / temp;
        float sum = 0.f;
        for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
            const float e = expf(p[v] / temp - m);
            p[v] = e;
            sum += e;
        }
        sum = block_sum(sum, fscratch);
        float pmax = 0.f;
        for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
            const float q = p[v] / sum;
            p[v] = q;
            pmax = fmaxf(pmax, q);
        }
        // 3. min-p against the largest probability, then renormalise.
        const float mp = minP != nullptr ? minP[r] : 0.f;
        if (mp > 0.f) {
            pmax = block_max(pmax, fscratch);
            const float floor = mp * pmax;
            float kept = 0.f;
            bool dropped = false;
            for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
                float q = p[v];
                if (q > 0.f && q < floor) {
                    q = 0.f;
                    dropped = true;
                }
                p[v] = q;
                kept += q;
            }
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
// ceil(vocab / 256) floats.
extern "C" __global__ void sample_from_probs(const float* probs, const long long* seeds, const long long* offsets,
                                             int* out, int vocab) {
    mstar::await_previous_kernel();
    float* blockSum = token_block_sum_smem();
    const int r = blockIdx.x;
    const float* p = probs + (long long)r * vocab;
    const int blocks = (vocab + kSampleBlock - 1) / kSampleBlock;
    for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
        const int end = min(vocab, (b + 1) * kSampleBlock);
        float s = 0.f;
        for (int i = b * kSampleBlock; i < end; ++i) s += p[i];
        blockSum[b] = s;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;

    const float u = (float)(philox_first((uint64_t)seeds[r], (uint64_t)offsets[r]) >> 8) * 0x1p-24f;
    float total = 0.f;
    for (int b = 0; b < blocks; ++b) total += blockSum[b];
    const float target = u * total;
    float cum = 0.f;
    int chosen = -1, lastNonEmpty = -1;
    for (int b = 0; b < blocks; ++b) {
        if (blockSum[b] > 0.f) lastNonEmpty = b;
        if (cum + blockSum[b] > target && blockSum[b] > 0.f) {
            chosen = b;
            break;
        }
        cum += blockSum[b];
    }
    if (chosen < 0) {
        if (lastNonEmpty < 0) {
            out[r] = 0;
            return;
        }
        chosen = lastNonEmpty;
        cum = 0.f;
        for (int b = 0; b < chosen; ++b) cum += blockSum[b];
    }
    const int end = min(vocab, (chosen + 1) * kSampleBlock);
    int lastPositive = -1;
    float c = cum;
    for (int i = chosen * kSampleBlock; i < end; ++i) {
        const float q = p[i];
        c += q;
        if (q > 0.f) {
            lastPositive = i;
            if (c > target) {
                out[r] = i;
                return;
            }
        }
    }
    out[r] = lastPositive;
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
