// Host emulation check of qkv_rope_append's bf16 path (rope.cu): the same tokens go through the 16-byte path and,
// with every buffer one element off 16-byte alignment, through the general per-pair path, and q and the pool must
// agree bit for bit: NeoX and interleaved rotations, full and partial rotary spans, head dims 64 and 128, positions
// from 0 to past 2^17. Then qk_norm_rope_append against the unfused sequence it replaces (split, rms_norm of each
// q and k head, rope_inplace, the append), bit for bit. Launch shapes as CudaOps gives them. Run: ./run.sh rope_checks
#include "cuda_host_shim.h"
#include "common.cuh"
#include "norm.cu"
#include "rope.cu"
#include <cstdio>
#include <random>
#include <vector>

using namespace mstar;
using bf16 = __nv_bfloat16;

static std::mt19937 rng(11);
static int fails = 0;

// CudaOps.qkvRopeAppend's block size
static unsigned rope_threads(int qHeads, int kvHeads, int headDim) {
    long warps = ((long)(qHeads + 2 * kvHeads) * headDim / 8 + 31) / 32;
    return (unsigned)std::max(32L, std::min(1024L, warps * 32));
}

// One layer's append of `positions.size()` tokens, each into its own page and offset; returns q and the pool.
static std::pair<std::vector<bf16>, std::vector<bf16>> append(const std::vector<bf16>& qkvIn, int offset,
                                                              const std::vector<int>& positions,
                                                              const std::vector<float>& invFreq, int qHeads,
                                                              int kvHeads, int headDim, int rotaryDim, int interleave) {
    const int tokens = (int)positions.size(), layers = 2, layer = 1, pages = 4, pageSize = 16;
    std::vector<bf16> qkv(offset + qkvIn.size());
    std::copy(qkvIn.begin(), qkvIn.end(), qkv.begin() + offset);
    std::vector<bf16> q(offset + (size_t)tokens * qHeads * headDim, __float2bfloat16(0.f));
    std::vector<bf16> pool(offset + (size_t)layers * pages * 2 * pageSize * kvHeads * headDim, __float2bfloat16(0.f));
    std::vector<int> pageIdx(tokens), offsets(tokens);
    for (int t = 0; t < tokens; t++) {
        pageIdx[t] = (3 * t + 1) % pages;
        offsets[t] = (5 * t + 2) % pageSize;
    }
    launch(tokens, rope_threads(qHeads, kvHeads, headDim), [&] {
        qkv_rope_append(qkv.data() + offset, DT_BF16, positions.data(), invFreq.data(), q.data() + offset, DT_BF16,
                        pool.data() + offset, DT_BF16, pageIdx.data(), offsets.data(), layer, pages, pageSize, qHeads,
                        kvHeads, headDim, rotaryDim, interleave, 1);
    });
    return {std::vector<bf16>(q.begin() + offset, q.end()), std::vector<bf16>(pool.begin() + offset, pool.end())};
}

static bool same(const std::vector<bf16>& a, const std::vector<bf16>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)) == 0;
}

static void check(int qHeads, int kvHeads, int headDim, int rotaryDim, int interleave) {
    const std::vector<int> positions = {0, 17, 5000, 140000};
    std::vector<bf16> qkv(positions.size() * (qHeads + 2 * kvHeads) * headDim);
    for (auto& x : qkv) x = __float2bfloat16(std::normal_distribution<float>(0.f, 1.f)(rng));
    std::vector<float> invFreq(rotaryDim / 2);
    for (int i = 0; i < rotaryDim / 2; i++) invFreq[i] = (float)std::pow(500000.0, -2.0 * i / rotaryDim);
    const auto vec = append(qkv, 0, positions, invFreq, qHeads, kvHeads, headDim, rotaryDim, interleave);
    const auto general = append(qkv, 1, positions, invFreq, qHeads, kvHeads, headDim, rotaryDim, interleave);
    if (!same(vec.first, general.first) || !same(vec.second, general.second)) {
        std::printf("FAIL qkv_rope_append q%d kv%d d%d rotary %d %s: bf16 path %s differs from the general path\n",
                    qHeads, kvHeads, headDim, rotaryDim, interleave ? "interleaved" : "NeoX",
                    same(vec.first, general.first) ? "pool" : "q");
        fails++;
    }
}

// qk_norm_rope_append's q and pool against split → rms_norm (each head a row) → rope_inplace → append, as
// LlamaForwardPass ran them for q/k-normed models.
static void check_qk_norm(int qHeads, int kvHeads, int headDim, int rotaryDim, int interleave) {
    const std::vector<int> positions = {0, 17, 5000, 140000};
    const int tokens = (int)positions.size(), layers = 2, layer = 1, pages = 4, pageSize = 16;
    const int width = (qHeads + 2 * kvHeads) * headDim, tokenElems = kvHeads * headDim;
    std::vector<bf16> qkv((size_t)tokens * width), qNorm(headDim), kNorm(headDim);
    for (auto& x : qkv) x = __float2bfloat16(std::normal_distribution<float>(0.f, 3.f)(rng));
    for (auto& x : qNorm) x = __float2bfloat16(std::uniform_real_distribution<float>(0.5f, 1.5f)(rng));
    for (auto& x : kNorm) x = __float2bfloat16(std::uniform_real_distribution<float>(0.5f, 1.5f)(rng));
    std::vector<float> invFreq(rotaryDim / 2);
    for (int i = 0; i < rotaryDim / 2; i++) invFreq[i] = (float)std::pow(1000000.0, -2.0 * i / rotaryDim);
    std::vector<int> pageIdx(tokens), offsets(tokens);
    for (int t = 0; t < tokens; t++) {
        pageIdx[t] = (3 * t + 1) % pages;
        offsets[t] = (5 * t + 2) % pageSize;
    }
    const float eps = 1e-6f;
    const size_t poolSize = (size_t)layers * pages * 2 * pageSize * tokenElems;
    std::vector<bf16> q((size_t)tokens * qHeads * headDim, __float2bfloat16(0.f)), pool(poolSize, __float2bfloat16(0.f));
    launch(tokens, 256, [&] {
        qk_norm_rope_append(qkv.data(), qNorm.data(), kNorm.data(), eps, positions.data(), invFreq.data(), q.data(),
                            pool.data(), pageIdx.data(), offsets.data(), layer, pages, pageSize, qHeads, kvHeads,
                            headDim, rotaryDim, interleave, 1);
    });
    // the unfused sequence
    std::vector<bf16> qs((size_t)tokens * qHeads * headDim), ks((size_t)tokens * tokenElems),
        vs((size_t)tokens * tokenElems), ref(poolSize, __float2bfloat16(0.f));
    for (int t = 0; t < tokens; t++) {
        const bf16* row = qkv.data() + (size_t)t * width;
        std::copy_n(row, qHeads * headDim, qs.data() + (size_t)t * qHeads * headDim);
        std::copy_n(row + qHeads * headDim, tokenElems, ks.data() + (size_t)t * tokenElems);
        std::copy_n(row + (qHeads + kvHeads) * headDim, tokenElems, vs.data() + (size_t)t * tokenElems);
    }
    const unsigned normThreads = (unsigned)std::max(32, (headDim / 8 + 31) / 32 * 32);
    launch(tokens * qHeads, normThreads, [&] {
        rms_norm(qs.data(), DT_BF16, nullptr, DT_BF16, qNorm.data(), DT_BF16, qs.data(), DT_BF16, headDim, eps);
    });
    launch(tokens * kvHeads, normThreads, [&] {
        rms_norm(ks.data(), DT_BF16, nullptr, DT_BF16, kNorm.data(), DT_BF16, ks.data(), DT_BF16, headDim, eps);
    });
    launch(tokens, 256, [&] {
        rope_inplace(qs.data(), DT_BF16, ks.data(), DT_BF16, positions.data(), invFreq.data(), qHeads, kvHeads, headDim,
                     rotaryDim, interleave);
    });
    for (int t = 0; t < tokens; t++) {
        const size_t k = pool_slot(layer, pages, pageIdx[t], 0, pageSize, offsets[t], tokenElems);
        const size_t v = pool_slot(layer, pages, pageIdx[t], 1, pageSize, offsets[t], tokenElems);
        std::copy_n(ks.data() + (size_t)t * tokenElems, tokenElems, ref.data() + k);
        std::copy_n(vs.data() + (size_t)t * tokenElems, tokenElems, ref.data() + v);
    }
    if (!same(q, qs) || !same(pool, ref)) {
        std::printf("FAIL qk_norm_rope_append q%d kv%d d%d rotary %d %s: %s differs from the unfused sequence\n",
                    qHeads, kvHeads, headDim, rotaryDim, interleave ? "interleaved" : "NeoX",
                    same(q, qs) ? "pool" : "q");
        fails++;
    }
}

int main() {
    check(32, 8, 128, 128, 0);  // Llama-3.1-8B
    check(32, 8, 64, 64, 0);    // Llama-3.2-1B
    check(8, 2, 128, 64, 0);    // partial rotary span
    check(8, 2, 64, 64, 1);     // interleaved (GPT-J)
    check(4, 4, 128, 32, 1);    // interleaved, partial
    check(4, 1, 256, 256, 0);   // the longest span the bf16 path takes
    check_qk_norm(32, 4, 128, 128, 0);  // Qwen3-30B-A3B
    check_qk_norm(8, 2, 64, 64, 0);
    check_qk_norm(8, 2, 128, 64, 0);    // partial rotary span
    check_qk_norm(8, 2, 64, 64, 1);     // interleaved
    check_qk_norm(4, 2, 256, 256, 0);   // Gemma 3's head dim
    std::printf(fails ? "rope_checks: %d emulated checks failed\n" : "rope_checks: all passed\n", fails);
    return fails != 0;
}
