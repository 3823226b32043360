// Host emulation checks of the warpgroup (wgmma) prefill attention kernels (attention_prefill_wgmma.cu), and over the
// paged pool the mma.sync kernel (attention_prefill_mma.cu) beside them, run on the CPU
// under cuda_host_shim.h, warp_mma_shim.h and wgmma_shim.h and compared with a plain double loop: over the paged pool
// (pages in random order, grouped query heads packed into a block's rows, a prompt alone and a chunk appended to a
// cached prefix, causal with and without a sliding window, row tiles and key tiles cut short) and over ragged spans
// (causal, every key, block-causal; head dims 128 and DeepSeek-V2's 192). It checks the tile layouts, descriptors,
// the register hand-off of P and the masks where no GPU is at hand; it says nothing about speed.
// Run: ./run.sh attention_prefill_checks
#define MSTAR_HOST_EMULATION
#include "warp_mma_shim.h"
#include "wgmma_shim.h"
using std::max;
using std::min;
#include <vector_functions.h>
#include "attention_prefill_mma.cu"
#include "attention_ragged.cu"
#include "attention_prefill_wgmma.cu"
#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>

using namespace mstar;
using bf16 = __nv_bfloat16;

static int fails = 0;

// The overlapped loop (each tile's values beside the next tile's scores, three stages), which the shipped kernels do
// not take yet, over the same pages and spans.
template <int D>
void paged_overlapped(const bf16* q, const void* pool, const int* qoIndptr, const int* kvIndptr, const int* kvIndices,
                      const int* lastPageLen, int layer, int numPages, int pageSize, int qoHeads, int kvHeads,
                      int window, float smScale, bf16* out) {
    prefill_wgmma_body<D, WgmmaShape<D, 64, 3, true>>(
        q, PagedKeys{PagedKv{pool, kvIndptr, kvIndices, lastPageLen, layer, numPages, pageSize, kvHeads}},
        Mask{1, window, 0}, qoIndptr, qoHeads, smScale, out);
}

template <int D>
void ragged_overlapped(const bf16* q, const bf16* k, const bf16* v, const int* qIndptr, const int* kvIndptr,
                       int qoHeads, int kvHeads, int causalBlock, float smScale, bf16* out) {
    prefill_wgmma_body<D, WgmmaShape<D, 64, 3, true>>(q, RaggedKeys{k, v, kvIndptr, kvHeads}, BlockMask{causalBlock},
                                                      qIndptr, qoHeads, smScale, out);
}

// Keys [lo, hi) visible to query i of a span of qLen queries over kvLen keys.
using Visible = std::function<void(int kvLen, int qLen, int i, int& lo, int& hi)>;

// softmax(q k / sqrt(d)) v per (query, head) in double; key(t, g) and value(t, g) give row t of KV head g.
template <class K, class V>
static std::vector<double> reference(const std::vector<bf16>& q, int qBegin, int qLen, int kvLen, int heads,
                                     int kvHeads, int d, const Visible& visible, K key, V value) {
    std::vector<double> out((size_t)qLen * heads * d, 0.0);
    for (int i = 0; i < qLen; ++i) {
        int lo, hi;
        visible(kvLen, qLen, i, lo, hi);
        for (int h = 0; h < heads; ++h) {
            const int g = h / (heads / kvHeads);
            const bf16* qh = &q[((size_t)(qBegin + i) * heads + h) * d];
            std::vector<double> s(max(0, hi - lo));
            double mx = -1e300, total = 0;
            for (int t = lo; t < hi; ++t) {
                double dot = 0;
                for (int e = 0; e < d; ++e) dot += (double)__bfloat162float(qh[e]) * __bfloat162float(key(t, g)[e]);
                mx = max(mx, s[t - lo] = dot / std::sqrt((double)d));
            }
            for (auto& v : s) total += v = std::exp(v - mx);
            for (int e = 0; e < d; ++e) {
                double o = 0;
                for (int t = lo; t < hi; ++t) o += s[t - lo] * __bfloat162float(value(t, g)[e]);
                out[((size_t)i * heads + h) * d + e] = hi > lo ? o / total : 0.0;
            }
        }
    }
    return out;
}

// Worst over output rows of max |got - want| / max |want|: bf16 outputs and bf16 softmax weights stay within a few
// 1e-3 of the row's largest element.
static double worst_row(const bf16* got, const std::vector<double>& want, int d) {
    double worst = 0;
    for (size_t row = 0; row < want.size() / d; ++row) {
        double maxWant = 1e-30, maxDiff = 0;
        for (int e = 0; e < d; ++e) {
            const size_t i = row * d + e;
            maxWant = max(maxWant, std::fabs(want[i]));
            const double diff = std::fabs(__bfloat162float(got[i]) - want[i]);
            maxDiff = std::isnan(diff) ? INFINITY : max(maxDiff, diff);
        }
        worst = max(worst, maxDiff / maxWant);
    }
    return worst;
}

static void report(bool ok, const char* what, double worst) {
    fails += !ok;
    std::printf("%s %-64s max |diff| / max |want| of a row %.2e\n", ok ? "ok  " : "FAIL", what, worst);
}

// Sequences of qLens[r] queries appended to kvLens[r] - qLens[r] cached keys, in one layer of a pool
// [2 layers, pages, 2, page, kvHeads, 128] whose pages lie in random order.
static void paged(int heads, int kvHeads, std::vector<int> qLens, std::vector<int> kvLens, int window,
                  std::mt19937& rng) {
    constexpr int d = 128, page = 16, layer = 1;
    using S = WgmmaPrefillShape<d>;
    const int rows = qLens.size();
    std::vector<int> qo(rows + 1, 0), kvIndptr(rows + 1, 0), last(rows);
    for (int r = 0; r < rows; ++r) {
        qo[r + 1] = qo[r] + qLens[r];
        kvIndptr[r + 1] = kvIndptr[r] + (kvLens[r] + page - 1) / page;
        last[r] = kvLens[r] - (kvIndptr[r + 1] - kvIndptr[r] - 1) * page;
    }
    const int pages = kvIndptr[rows] + 2;
    std::vector<int> order(pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int> indices(order.begin(), order.begin() + kvIndptr[rows]);
    std::uniform_real_distribution<float> u(-1.7f, 1.7f);
    std::vector<bf16> pool((size_t)2 * pages * 2 * page * kvHeads * d), q((size_t)qo[rows] * heads * d);
    for (auto& v : pool) v = __float2bfloat16(u(rng));
    for (auto& v : q) v = __float2bfloat16(u(rng));
    std::vector<bf16> out(q.size(), __float2bfloat16(NAN));

    // the warpgroup kernel, and the mma.sync one it stands in for on Hopper (the same inputs and reference)
    std::vector<bf16> mmaOut(q.size(), __float2bfloat16(NAN));
    const int maxQ = *std::max_element(qLens.begin(), qLens.end());
    const unsigned tiles = (maxQ * (heads / kvHeads) + S::ROWS - 1) / S::ROWS;
    const unsigned mmaTiles = (maxQ * (heads / kvHeads) + MmaPrefillShape<d>::ROWS - 1) / MmaPrefillShape<d>::ROWS;
    for (const bool warpgroup : {true, false}) {
        launch3(Dim3{warpgroup ? tiles : mmaTiles, (unsigned)kvHeads, (unsigned)rows},
                warpgroup ? S::THREADS : MmaPrefillShape<d>::THREADS, [&] {
                    (warpgroup ? attn_prefill_wgmma_bf16_d128 : attn_prefill_mma_bf16_d128)(
                        q.data(), pool.data(), qo.data(), kvIndptr.data(), indices.data(), last.data(), layer, pages,
                        page, heads, kvHeads, 1, window, 0, 1.f / std::sqrt((float)d),
                        warpgroup ? out.data() : mmaOut.data());
                });
    }
    std::vector<bf16> overlappedOut(q.size(), __float2bfloat16(NAN));
    launch3(Dim3{tiles, (unsigned)kvHeads, (unsigned)rows}, S::THREADS, [&] {
        paged_overlapped<d>(q.data(), pool.data(), qo.data(), kvIndptr.data(), indices.data(), last.data(), layer,
                            pages, page, heads, kvHeads, window, 1.f / std::sqrt((float)d), overlappedOut.data());
    });
    double worst = 0, worstMma = 0, worstOverlapped = 0;
    for (int r = 0; r < rows; ++r) {
        auto at = [&](int t, int g, int kv) {
            const int p = indices[kvIndptr[r] + t / page];
            return &pool[((((size_t)layer * pages + p) * 2 + kv) * page + t % page) * kvHeads * d + (size_t)g * d];
        };
        const Mask mask{1, window, 0};
        const std::vector<double> want = reference(
            q, qo[r], qLens[r], kvLens[r], heads, kvHeads, d,
            [&](int kvLen, int qLen, int i, int& lo, int& hi) { mask.visible(kvLen, qLen, kvLen - qLen + i, lo, hi); },
            [&](int t, int g) { return at(t, g, 0); }, [&](int t, int g) { return at(t, g, 1); });
        worst = max(worst, worst_row(&out[(size_t)qo[r] * heads * d], want, d));
        worstMma = max(worstMma, worst_row(&mmaOut[(size_t)qo[r] * heads * d], want, d));
        worstOverlapped = max(worstOverlapped, worst_row(&overlappedOut[(size_t)qo[r] * heads * d], want, d));
    }
    char what[160];
    std::snprintf(what, sizeof what, "paged d128, %d/%d heads, %d sequences (first %d on %d keys), window %d", heads,
                  kvHeads, rows, qLens[0], kvLens[0], window);
    report(worst <= 1e-2, what, worst);
    report(worstMma <= 1e-2, "  the same on the mma.sync kernel", worstMma);
    report(worstOverlapped <= 1e-2, "  the same on the overlapped loop (64-key tiles, 3 stages)", worstOverlapped);
}

// Spans of qLens[r] queries over kvLens[r] keys, q, k, v packed [tokens, heads, d].
template <int D>
static void ragged(int heads, int kvHeads, std::vector<int> qLens, std::vector<int> kvLens, int causalBlock,
                   std::mt19937& rng) {
    using S = WgmmaPrefillShape<D>;
    const int rows = qLens.size();
    std::vector<int> qIndptr(rows + 1, 0), kvIndptr(rows + 1, 0);
    for (int r = 0; r < rows; ++r) {
        qIndptr[r + 1] = qIndptr[r] + qLens[r];
        kvIndptr[r + 1] = kvIndptr[r] + kvLens[r];
    }
    std::uniform_real_distribution<float> u(-1.7f, 1.7f);
    std::vector<bf16> q((size_t)qIndptr[rows] * heads * D), k((size_t)kvIndptr[rows] * kvHeads * D), v(k.size());
    for (auto* t : {&q, &k, &v})
        for (auto& x : *t) x = __float2bfloat16(u(rng));
    std::vector<bf16> out(q.size(), __float2bfloat16(NAN));
    const int maxQ = *std::max_element(qLens.begin(), qLens.end());
    const unsigned tiles = (maxQ * (heads / kvHeads) + S::ROWS - 1) / S::ROWS;
    auto kernel = D == 128 ? attn_ragged_wgmma_bf16_d128 : attn_ragged_wgmma_bf16_d192;
    launch3(Dim3{tiles, (unsigned)kvHeads, (unsigned)rows}, S::THREADS, [&] {
        kernel(q.data(), k.data(), v.data(), qIndptr.data(), kvIndptr.data(), heads, kvHeads, causalBlock,
               1.f / std::sqrt((float)D), out.data());
    });
    std::vector<bf16> overlappedOut(q.size(), __float2bfloat16(NAN));
    launch3(Dim3{tiles, (unsigned)kvHeads, (unsigned)rows}, S::THREADS, [&] {
        ragged_overlapped<D>(q.data(), k.data(), v.data(), qIndptr.data(), kvIndptr.data(), heads, kvHeads,
                             causalBlock, 1.f / std::sqrt((float)D), overlappedOut.data());
    });
    double worst = 0, worstOverlapped = 0;
    const BlockMask mask{causalBlock};
    for (int r = 0; r < rows; ++r) {
        const std::vector<double> want = reference(
            q, qIndptr[r], qLens[r], kvLens[r], heads, kvHeads, D,
            [&](int kvLen, int qLen, int i, int& lo, int& hi) { mask.visible(kvLen, qLen, kvLen - qLen + i, lo, hi); },
            [&](int t, int g) { return &k[((size_t)(kvIndptr[r] + t) * kvHeads + g) * D]; },
            [&](int t, int g) { return &v[((size_t)(kvIndptr[r] + t) * kvHeads + g) * D]; });
        worst = max(worst, worst_row(&out[(size_t)qIndptr[r] * heads * D], want, D));
        worstOverlapped = max(worstOverlapped, worst_row(&overlappedOut[(size_t)qIndptr[r] * heads * D], want, D));
    }
    char what[160];
    std::snprintf(what, sizeof what, "ragged d%d, %d/%d heads, %d spans (first %d on %d keys), causal block %d", D,
                  heads, kvHeads, rows, qLens[0], kvLens[0], causalBlock);
    report(worst <= 1e-2, what, worst);
    report(worstOverlapped <= 1e-2, "  the same on the overlapped loop (64-key tiles, 3 stages)", worstOverlapped);
}

int main() {
    std::mt19937 rng(11);
    // grouped heads packed 8 to a query: 16 queries a row tile; a prompt alone, a chunk on a cached prefix
    paged(16, 2, {200, 37}, {200, 300}, -1, rng);
    paged(16, 2, {150}, {150}, 50, rng);
    // heads not grouped: 128 queries a row tile, the last tile of each span cut short
    paged(4, 4, {257, 5}, {257, 133}, -1, rng);
    ragged<128>(4, 2, {300, 64}, {300, 64}, 1, rng);
    ragged<128>(2, 2, {100}, {100}, 0, rng);
    ragged<128>(2, 1, {200}, {200}, 64, rng);
    ragged<192>(2, 2, {150, 70}, {150, 70}, 1, rng);
    std::printf("%s\n", fails ? "FAILED" : "all passed");
    return fails != 0;
}
