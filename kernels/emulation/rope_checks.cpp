// Host emulation check of qkv_rope_append's bf16 path (rope.cu): the same tokens go through the 16-byte path and,
// with every buffer one element off 16-byte alignment, through the general per-pair path, and q and the pool must
// agree bit for bit: NeoX and interleaved rotations, full and partial rotary spans, head dims 64 and 128, positions
// from 0 to past 2^17. Launch shapes as CudaOps gives them. Run: ./run.sh rope_checks
#include "cuda_host_shim.h"
#include "common.cuh"
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

int main() {
    check(32, 8, 128, 128, 0);  // Llama-3.1-8B
    check(32, 8, 64, 64, 0);    // Llama-3.2-1B
    check(8, 2, 128, 64, 0);    // partial rotary span
    check(8, 2, 64, 64, 1);     // interleaved (GPT-J)
    check(4, 4, 128, 32, 1);    // interleaved, partial
    check(4, 1, 256, 256, 0);   // the longest span the bf16 path takes
    std::printf(fails ? "rope_checks: %d emulated checks failed\n" : "rope_checks: all passed\n", fails);
    return fails != 0;
}
