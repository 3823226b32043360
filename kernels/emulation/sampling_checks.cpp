// Host emulation checks of the sampling kernels (sampling.cu): sampling_probs and sample_from_probs run on the CPU
// under cuda_host_shim.h next to the kernels as they were before their loops were batched (sampling_reference.cuh),
// over rows of every kind (greedy, greedy with held-back stop ids, temperature, min-p, top-k, top-p in both orders,
// min-keep, penalties, tied logits) at vocab 128256 and 50257, launched as CudaOps launches them. Probabilities
// must agree bit for bit and tokens exactly. It says nothing about speed or the GPU's memory model. Run: ./run.sh
#define MSTAR_HOST_EMULATION
#include "cuda_host_shim.h"
#include "warp_mma_shim.h"
#include <algorithm>
#include <climits>
#include <cstdio>
#include <random>
using std::min;

// sample_from_probs' dynamic shared memory: ceil(vocab / 256) floats
static float g_token_block_sums[4096];
static float* token_block_sum_smem() { return g_token_block_sums; }

#include "common.cuh"
#include "sampling.cu"

namespace reference {
#define sampling_probs reference_sampling_probs
#define sample_from_probs reference_sample_from_probs
#define argmax_rows reference_argmax_rows
#define mask_logits reference_mask_logits
#include "sampling_reference.cuh"
#undef sampling_probs
#undef sample_from_probs
#undef argmax_rows
#undef mask_logits
}  // namespace reference

static std::mt19937 rng(11);
static int fails = 0;

static void expect(bool ok, const char* what, int vocab, int row, long long got, long long want) {
    if (!ok) {
        if (fails < 20) std::printf("FAIL %s (vocab %d, row %d): got %lld, want %lld\n", what, vocab, row, got, want);
        fails++;
    }
}

// One row's sampling parameters, as SamplingBatch holds them.
struct RowKind {
    float temperature;
    int topK;
    float topP, minP, penalty;
    int topPFirst, minKeep, maskStops;
};

static const RowKind kKinds[] = {
    {0.f, 0, 1.f, 0.f, 1.f, 0, 1, 0},       // greedy
    {0.f, 0, 1.f, 0.f, 1.5f, 0, 1, 1},      // greedy, penalty, stop ids held back (one of them is the argmax)
    {1.f, 0, 1.f, 0.f, 1.f, 0, 1, 0},       // temperature only
    {0.7f, 50, 1.f, 0.f, 1.f, 0, 1, 0},     // top-k
    {1.3f, 0, 0.9f, 0.f, 1.f, 0, 1, 0},     // top-p
    {0.8f, 100, 0.8f, 0.f, 1.f, 0, 1, 0},   // top-k, then top-p
    {1.f, 40, 0.5f, 0.f, 1.f, 1, 3, 0},     // top-p first, min-keep 3
    {1.f, 0, 1.f, 0.05f, 1.3f, 0, 1, 0},    // min-p, penalty
    {1.f, 0, 0.95f, 0.f, 1.f, 0, 1, 1},     // top-p, stop ids
    {0.5f, 1, 1.f, 0.f, 1.f, 0, 1, 0},      // top-k 1
    {2.f, 0, 0.3f, 0.f, 1.f, 1, 20, 0},     // top-p first, min-keep 20
    {1.f, 5000, 1.f, 0.f, 1.f, 0, 1, 0},    // top-k cutting through a run of ties spread over many chunks
    {0.9f, 3000, 0.97f, 0.02f, 1.2f, 0, 1, 1},  // everything at once
};
constexpr int kRows = sizeof(kKinds) / sizeof(kKinds[0]);

// Runs both sampling_probs on the same rows (odd rows' logits are coarse, so that equal probabilities abound) and
// compares every bit of probs; returns the probabilities for the draw checks.
static std::vector<float> check_sampling_probs(int vocab) {
    std::normal_distribution<float> normal(0.f, 3.f);
    std::vector<float> logits((size_t)kRows * vocab), counts((size_t)kRows * vocab);
    for (int r = 0; r < kRows; r++)
        for (int v = 0; v < vocab; v++) {
            const float x = normal(rng);
            logits[(size_t)r * vocab + v] = r % 2 == 1 ? std::round(x * 2.f) / 2.f : x;
            const int c = (int)(rng() % 40);
            counts[(size_t)r * vocab + v] = c == 0 ? 1.f : c == 1 ? 3.f : 0.f;
        }
    const int heldArgmax = 12345;
    logits[(size_t)1 * vocab + heldArgmax] = 100.f;
    std::vector<float> temp(kRows), topP(kRows), minP(kRows), pen(kRows);
    std::vector<int> topK(kRows), first(kRows), keep(kRows), mask(kRows);
    for (int r = 0; r < kRows; r++) {
        temp[r] = kKinds[r].temperature;
        topK[r] = kKinds[r].topK;
        topP[r] = kKinds[r].topP;
        minP[r] = kKinds[r].minP;
        pen[r] = kKinds[r].penalty;
        first[r] = kKinds[r].topPFirst;
        keep[r] = kKinds[r].minKeep;
        mask[r] = kKinds[r].maskStops;
    }
    std::vector<int> stops = {2, 7, heldArgmax, vocab - 1};
    std::vector<float> got((size_t)kRows * vocab, NAN), want((size_t)kRows * vocab, NAN);
    launch(kRows, 1024, [&] {
        sampling_probs(logits.data(), got.data(), vocab, temp.data(), topK.data(), topP.data(), minP.data(),
                       pen.data(), counts.data(), first.data(), keep.data(), mask.data(), stops.data(),
                       (int)stops.size(), 1);
    });
    launch(kRows, 1024, [&] {
        reference::reference_sampling_probs(logits.data(), want.data(), vocab, temp.data(), topK.data(), topP.data(),
                                            minP.data(), pen.data(), counts.data(), first.data(), keep.data(),
                                            mask.data(), stops.data(), (int)stops.size(), 1);
    });
    for (int r = 0; r < kRows; r++) {
        int differ = 0, kept = 0;
        for (int v = 0; v < vocab; v++) {
            const size_t i = (size_t)r * vocab + v;
            differ += __float_as_uint(got[i]) != __float_as_uint(want[i]);
            kept += want[i] > 0.f;
        }
        expect(differ == 0, "sampling_probs elements differing", vocab, r, differ, 0);
        // a filter that keeps everything would leave the tie ranking untested
        if (kKinds[r].topK > 1)
            expect(kept <= kKinds[r].topK, "top-k row keeps at most k", vocab, r, kept, kKinds[r].topK);
    }
    const int oneHot = (int)(std::find(&want[vocab], &want[2 * (size_t)vocab], 1.f) - &want[vocab]);
    expect(oneHot < vocab && oneHot != heldArgmax, "greedy row with its argmax held back", vocab, 1, oneHot, -1);
    // without filters (the path that skips top-k and top-p)
    std::vector<float> gotNoFilters((size_t)kRows * vocab), wantNoFilters((size_t)kRows * vocab);
    launch(kRows, 1024, [&] {
        sampling_probs(logits.data(), gotNoFilters.data(), vocab, temp.data(), topK.data(), topP.data(), nullptr,
                       nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, 0);
    });
    launch(kRows, 1024, [&] {
        reference::reference_sampling_probs(logits.data(), wantNoFilters.data(), vocab, temp.data(), topK.data(),
                                            topP.data(), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                            nullptr, 0, 0);
    });
    int differ = 0;
    for (size_t i = 0; i < gotNoFilters.size(); i++)
        differ += __float_as_uint(gotNoFilters[i]) != __float_as_uint(wantNoFilters[i]);
    expect(differ == 0, "sampling_probs without filters, elements differing", vocab, -1, differ, 0);
    return got;
}

// Each token block's sum, as sample_from_probs' warps take it, against a plain loop in token order, bit for bit.
static void check_token_block_sums(const std::vector<float>& rows, int vocab) {
    const int n = (int)(rows.size() / vocab), blocks = (vocab + 255) / 256;
    static float tiles[kSumWarps][32][33];
    for (int r = 0; r < n; r++) {
        const float* p = &rows[(size_t)r * vocab];
        launch(1, 256, [&] { token_block_sums(p, vocab, blocks, g_token_block_sums, tiles[threadIdx.x / 32]); });
        int differ = 0;
        for (int b = 0; b < blocks; b++) {
            float s = 0.f;
            for (int i = b * 256; i < std::min(vocab, b * 256 + 256); i++) s += p[i];
            differ += __float_as_uint(s) != __float_as_uint(g_token_block_sums[b]);
        }
        expect(differ == 0, "token block sums differing", vocab, r, differ, 0);
    }
}

// Both sample_from_probs on the given rows, each drawn with several seeds and offsets; tokens must be equal. The
// reference always runs with 256 threads.
static void check_draws(const std::vector<float>& rows, int vocab, const char* what, unsigned threads = 256) {
    const int n = (int)(rows.size() / vocab), draws = 6;
    std::vector<float> probs((size_t)n * draws * vocab);
    std::vector<long long> seeds(n * draws), offsets(n * draws);
    for (int i = 0; i < n * draws; i++) {
        std::copy_n(&rows[(size_t)(i / draws) * vocab], vocab, &probs[(size_t)i * vocab]);
        seeds[i] = (long long)(((uint64_t)rng() << 32) | rng());
        offsets[i] = i % 3 == 0 ? (long long)(rng() % 4096) : (long long)((((uint64_t)rng() << 32) | rng()) >> 1);
    }
    std::vector<int> got(n * draws, -7), want(n * draws, -7);
    launch(n * draws, threads,
           [&] { sample_from_probs(probs.data(), seeds.data(), offsets.data(), got.data(), vocab); });
    launch(n * draws, 256, [&] {
        reference::reference_sample_from_probs(probs.data(), seeds.data(), offsets.data(), want.data(), vocab);
    });
    for (int i = 0; i < n * draws; i++) expect(got[i] == want[i], what, vocab, i, got[i], want[i]);
}

// Distributions with zero runs, a one-hot row, an all-zero row, a zero tail past a token-block edge, mass only in
// the last (partial) token block, and tiny values that a running sum absorbs.
static std::vector<float> edge_rows(int vocab) {
    const int n = 7;
    std::vector<float> p((size_t)n * vocab, 0.f);
    std::uniform_real_distribution<float> u(0.f, 1.f);
    for (int v = 0; v < vocab; v++) {
        const float x = u(rng);
        p[v] = rng() % 4 == 0 ? 0.f : x * x * x;
        p[(size_t)3 * vocab + v] = rng() % 4 == 0 ? 0.f : x * x * x;
    }
    p[(size_t)1 * vocab + vocab / 2] = 1.f;                                  // one-hot
    std::fill_n(&p[(size_t)3 * vocab + vocab - 300], 300, 0.f);              // zero tail past a block edge
    for (int v = (vocab - 1) / 256 * 256; v < vocab; v++) p[(size_t)4 * vocab + v] = u(rng);  // last block only
    for (int v = 0; v < vocab; v++) p[(size_t)5 * vocab + v] = v % 1000 == 0 ? 1.f : 1e-12f;  // absorbed values
    for (int v = 0; v < vocab; v++) p[(size_t)6 * vocab + v] = v % 7 == 0 ? 0.25f : 0.f;  // equal probabilities
    return p;
}

// The block and token picks where the running sum never passes the target: the last nonempty block, the sum of
// the blocks before it, the last positive token.
static void check_pick_fallbacks() {
    const float sums[] = {0.5f, 0.f, 0.25f, 0.f, 0.f};
    float cum = -1.f;
    const int b = pick_block(sums, 5, INFINITY, cum);
    expect(b == 2, "pick_block fallback: the last nonempty block", 0, 0, b, 2);
    expect(cum == 0.5f, "pick_block fallback: the sum before it, in thousandths", 0, 0, std::lround(cum * 1000), 500);
    expect(pick_block(sums + 3, 2, 0.f, cum) == -1, "pick_block on no mass", 0, 0, 0, -1);
    std::vector<float> q(40, 0.f);
    q[3] = 1.f;
    q[33] = 2.f;
    const int t = pick_token(q.data(), 37, 1000, 0.f, INFINITY);
    expect(t == 1033, "pick_token fallback", 0, 0, t, 1033);
    expect(pick_token(q.data(), 37, 1000, 0.f, 0.5f) == 1003, "pick_token first past target", 0, 0, 0, 1003);
}

// argmax_rows, a block per chunk of a row and the last to count merging the chunks' bests, against the kernel it
// replaced (a block per row): ties across chunks, a maximum in the last element, NaN, a row of -inf.
static void check_argmax(int vocab, int rows) {
    std::vector<float> logits((size_t)rows * vocab);
    for (float& v : logits) v = 3.f * std::normal_distribution<float>(0.f, 1.f)(rng);
    logits[5] = logits[vocab - 7] = 100.f;
    if (rows > 1) std::fill(logits.begin() + vocab, logits.begin() + 2 * vocab, -INFINITY);
    if (rows > 2) {
        logits[2 * (size_t)vocab] = NAN;
        logits[3 * (size_t)vocab - 1] = 50.f;
    }
    const unsigned chunks = (vocab + 4095) / 4096;
    std::vector<float> partialValue((size_t)rows * chunks);
    std::vector<int> partialIndex((size_t)rows * chunks), done(rows, 0), got(rows, -1), want(rows, -1);
    for (int launchNo = 0; launchNo < 2; launchNo++) {  // the second finds the counters the first left
        launch3(Dim3{chunks, (unsigned)rows, 1}, 256, [&] {
            argmax_rows(logits.data(), DT_F32, got.data(), vocab, partialValue.data(), partialIndex.data(),
                        done.data());
        });
    }
    launch(rows, 1024, [&] { reference::reference_argmax_rows(logits.data(), DT_F32, want.data(), vocab); });
    for (int r = 0; r < rows; r++) {
        expect(got[r] == want[r], "argmax_rows", vocab, r, got[r], want[r]);
        expect(done[r] == 0, "argmax_rows leaves its counter at zero", vocab, r, done[r], 0);
    }
}

int main() {
    check_argmax(128256, 3);
    check_argmax(50257, 3);
    check_argmax(1000, 1);
    check_pick_fallbacks();
    for (int vocab : {128256, 50257}) {
        const std::vector<float> probs = check_sampling_probs(vocab), edges = edge_rows(vocab);
        check_token_block_sums(probs, vocab);
        check_token_block_sums(edges, vocab);
        check_draws(probs, vocab, "sample_from_probs on sampling_probs rows, tokens differing");
        check_draws(edges, vocab, "sample_from_probs on edge rows, tokens differing");
    }
    check_draws(edge_rows(1000), 1000, "sample_from_probs at vocab 1000, tokens differing");
    check_draws(edge_rows(50257), 50257, "sample_from_probs with 2 warps, tokens differing", 64);
    if (fails) {
        std::printf("sampling_checks: %d FAILED\n", fails);
        return 1;
    }
    std::printf("sampling_checks: all passed\n");
    return 0;
}
