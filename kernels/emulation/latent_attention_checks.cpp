// Host emulation checks of the latent (MLA) attention kernels (latent_attention.cu), launched as CudaLatentAttention
// launches them, on the CPU under cuda_host_shim.h: latent_append (the latent RMS-normalised, the rope part rotated,
// the row written at its page slot and nothing else), latent_query (the key up-projection absorbed, the rope part
// rotated), latent_attention over a paged latent pool (a decode row, an empty sequence, a prefill chunk causal over a
// cached prefix, a window and a context-only mask) and latent_values. Each against a double-precision loop over the
// same stored inputs, within fp32 summation error (plus one rounding for bf16 outputs); at a tiny geometry and at
// DeepSeek-V2-Lite's (R 512, Dr 64, Dn 128, Dv 128); and the tensor-core latent_attention_mma with its merge (bf16,
// 16 and 32 heads, decode rows over 0 to 700 keys and prefill chunks over cached prefixes, each row's keys in one
// slice or several, a window, a context-only mask).
// It checks fragment layouts, indexing and arithmetic where no GPU is at hand; it says nothing about speed.
// Run: ./run.sh latent_attention_checks
#define MSTAR_HOST_EMULATION
#include "warp_mma_shim.h"
#include <algorithm>
using std::max;
using std::min;
#include "common.cuh"
#include "random_buffer.h"
#include "latent_attention.cu"
#include <cstdio>
#include <random>
#include <vector>

using namespace mstar;

static int fails = 0;

// |got - want| over the largest |want|, worst over the outputs; the tolerance of the output's dtype.
static void report(const char* what, int dt, double worst, double scale) {
    const double err = scale > 0 ? worst / scale : worst;
    const double tol = dt == DT_BF16 ? 1e-2 : 2e-5;
    if (!(err <= tol)) {
        std::printf("FAIL %s (%s): relative error %.3g > %.3g\n", what, dt == DT_BF16 ? "bf16" : "fp32", err, tol);
        fails++;
    }
}

static std::vector<float> inv_freq(int ropeDim) {
    std::vector<float> inv(ropeDim / 2);
    for (int i = 0; i < ropeDim / 2; i++) inv[i] = (float)std::pow(10000.0, -2.0 * i / ropeDim);
    return inv;
}

// The pair rotation of the ropeDim values x at pos, in double.
static std::vector<double> rotated(const std::vector<double>& x, int pos, const std::vector<float>& inv, int interleave) {
    const int d = (int)x.size(), half = d / 2;
    std::vector<double> out(x);
    for (int p = 0; p < half; p++) {
        const int a = interleave ? 2 * p : p, b = interleave ? 2 * p + 1 : p + half;
        const double ang = (double)(float)((float)pos * inv[p]);
        out[a] = x[a] * std::cos(ang) - x[b] * std::sin(ang);
        out[b] = x[b] * std::cos(ang) + x[a] * std::sin(ang);
    }
    return out;
}

static void append(int dt, int n, int rank, int ropeDim, int interleave) {
    const int width = rank + ropeDim, layers = 2, layer = 1, pages = 5, pageSize = 4;
    Buffer kvA(dt, (size_t)n * width, 1.f), norm(dt, rank, 0.5f);
    Buffer pool(dt, (size_t)layers * pages * pageSize * width, 0);
    for (size_t i = 0; i < pool.bytes.size() / (dt == DT_BF16 ? 2 : 4); i++) store_f(pool.data(), dt, (long long)i, NAN);
    std::vector<int> pos(n), pageIdx(n), offsets(n);
    for (int i = 0; i < n; i++) {
        pos[i] = 3 + 1000 * i;
        pageIdx[i] = (2 * i + 1) % pages;
        offsets[i] = (3 * i) % pageSize;
    }
    const auto inv = inv_freq(ropeDim);
    launch(n, kLatentThreads, [&] {
        latent_append(kvA.data(), dt, norm.data(), dt, 1e-6f, pos.data(), inv.data(), pool.data(), dt, pageIdx.data(),
                      offsets.data(), layer, pages, pageSize, rank, ropeDim, interleave);
    });
    double worst = 0, scale = 0;
    std::vector<bool> written((size_t)layers * pages * pageSize, false);
    for (int i = 0; i < n; i++) {
        double ss = 0;
        for (int c = 0; c < rank; c++) ss += (double)kvA.at((size_t)i * width + c) * kvA.at((size_t)i * width + c);
        const double inverse = 1 / std::sqrt(ss / rank + 1e-6);
        std::vector<double> pe(ropeDim);
        for (int e = 0; e < ropeDim; e++) pe[e] = kvA.at((size_t)i * width + rank + e);
        pe = rotated(pe, pos[i], inv, interleave);
        const size_t slot = ((size_t)layer * pages + pageIdx[i]) * pageSize + offsets[i];
        written[slot] = true;
        for (int c = 0; c < width; c++) {
            const double want = c < rank ? kvA.at((size_t)i * width + c) * inverse * norm.at(c) : pe[c - rank];
            worst = std::max(worst, std::fabs(pool.at(slot * width + c) - want));
            scale = std::max(scale, std::fabs(want));
        }
    }
    for (size_t s = 0; s < written.size(); s++) {
        if (!written[s] && !std::isnan(pool.at(s * width))) {
            std::printf("FAIL latent_append wrote slot %zu, which no token addresses\n", s);
            fails++;
        }
    }
    report("latent_append", dt, worst, scale);
}

static void query(int dt, int n, int heads, int nope, int ropeDim, int rank, int dv) {
    const int kvBRows = nope + dv;
    Buffer q(dt, (size_t)n * heads * (nope + ropeDim), 1.f), kvB(dt, (size_t)heads * kvBRows * rank, 0.1f);
    Buffer out(dt, (size_t)n * heads * (rank + ropeDim), 0);
    std::vector<int> pos(n);
    for (int i = 0; i < n; i++) pos[i] = 7 * i + 1;
    const auto inv = inv_freq(ropeDim);
    launch(n * heads, kLatentThreads, [&] {
        latent_query(q.data(), dt, kvB.data(), dt, pos.data(), inv.data(), out.data(), dt, heads, nope, ropeDim, rank,
                     kvBRows, 1, 0);
    });
    double worst = 0, scale = 0;
    for (int t = 0; t < n * heads; t++) {
        const int h = t % heads;
        const size_t in = (size_t)t * (nope + ropeDim), o = (size_t)t * (rank + ropeDim);
        for (int c = 0; c < rank; c++) {
            double want = 0;
            for (int d = 0; d < nope; d++) want += (double)q.at(in + d) * kvB.at(((size_t)h * kvBRows + d) * rank + c);
            worst = std::max(worst, std::fabs(out.at(o + c) - want));
            scale = std::max(scale, std::fabs(want));
        }
        std::vector<double> pe(ropeDim);
        for (int e = 0; e < ropeDim; e++) pe[e] = q.at(in + nope + e);
        pe = rotated(pe, pos[t / heads], inv, 1);
        for (int e = 0; e < ropeDim; e++) worst = std::max(worst, std::fabs(out.at(o + rank + e) - pe[e]));
    }
    report("latent_query", dt, worst, scale);
}

// Sequences of qLens[r] query rows over kvLens[r] keys on pages of pageSize, pages handed out in a shuffled order.
// With splits > 0 (bf16 rows at R 512, Dr 64): latent_attention_mma over that many slices, then the merge, as
// CudaLatentAttention launches them.
static void attention(const char* name, int dt, int heads, int rank, int ropeDim, int pageSize,
                      const std::vector<int>& qLens, const std::vector<int>& kvLens, int causal, int windowLeft,
                      int contextOnly, int splits = 0) {
    const int width = rank + ropeDim, rows = (int)qLens.size(), layers = 2, layer = 1;
    std::vector<int> qoIndptr{0}, kvIndptr{0}, indices, last;
    int pagesTotal = 0;
    for (int r = 0; r < rows; r++) {
        qoIndptr.push_back(qoIndptr.back() + qLens[r]);
        const int p = (kvLens[r] + pageSize - 1) / pageSize;
        kvIndptr.push_back(kvIndptr.back() + p);
        last.push_back(p == 0 ? 0 : kvLens[r] - (p - 1) * pageSize);
        pagesTotal += p;
    }
    // distinct pages in reverse order, page 0 left unused (the sink)
    const int numPages = pagesTotal + 3;
    for (int i = 0; i < pagesTotal; i++) indices.push_back(numPages - 1 - i);
    const int totalQo = qoIndptr.back();
    Buffer q(dt, (size_t)totalQo * heads * width, 1.f);
    Buffer pool(dt, (size_t)layers * numPages * pageSize * width, 1.f);
    Buffer out(dt, (size_t)totalQo * heads * rank, 0);
    const float smScale = 1.f / std::sqrt(192.f);
    if (splits > 0) {
        using bf16 = __nv_bfloat16;
        std::vector<float> partialO((size_t)totalQo * heads * splits * rank, NAN),
            partialLse((size_t)totalQo * heads * splits, NAN);
        for (size_t i = 0; i < out.bytes.size() / 2; i++) store_f(out.data(), dt, (long long)i, NAN);
        launch3(Dim3{(unsigned)splits, (unsigned)(heads / kLdHeads), (unsigned)totalQo}, kLdWarps * 32, [&] {
            latent_attention_mma((const bf16*)q.data(), (const bf16*)pool.data(), qoIndptr.data(), kvIndptr.data(),
                                 indices.data(), last.data(), (bf16*)out.data(), partialO.data(), partialLse.data(),
                                 rows, heads, pageSize, numPages, layer, smScale, causal, windowLeft, contextOnly,
                                 splits);
        });
        if (splits > 1) {
            launch(totalQo * heads, kLatentThreads, [&] {
                latent_attention_merge(qoIndptr.data(), kvIndptr.data(), last.data(), partialO.data(),
                                       partialLse.data(), (bf16*)out.data(), rows, heads, pageSize, causal, windowLeft,
                                       contextOnly, splits);
            });
        }
    } else {
        launch(totalQo * heads, kLatentThreads, [&] {
            latent_attention(q.data(), dt, pool.data(), dt, qoIndptr.data(), kvIndptr.data(), indices.data(),
                             last.data(), out.data(), dt, rows, heads, rank, width, pageSize, numPages, layer, smScale,
                             causal, windowLeft, contextOnly);
        });
    }
    double worst = 0, scale = 0;
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < qLens[r]; i++) {
            const int pos = kvLens[r] - qLens[r] + i;
            const int from = windowLeft >= 0 ? std::max(0, pos - windowLeft) : 0;
            int to = causal ? std::min(kvLens[r], pos + 1) : kvLens[r];
            if (contextOnly) to = std::min(to, kvLens[r] - qLens[r]);
            for (int h = 0; h < heads; h++) {
                const size_t qRow = ((size_t)(qoIndptr[r] + i) * heads + h);
                std::vector<double> s;
                double max = -INFINITY;
                for (int j = from; j < to; j++) {
                    const size_t base = (((size_t)layer * numPages + indices[kvIndptr[r] + j / pageSize]) * pageSize
                                         + j % pageSize) * width;
                    double dot = 0;
                    for (int c = 0; c < width; c++) dot += (double)q.at(qRow * width + c) * pool.at(base + c);
                    s.push_back(dot * smScale);
                    max = std::max(max, s.back());
                }
                double sum = 0;
                for (double& v : s) sum += (v = std::exp(v - max));
                for (int c = 0; c < rank; c++) {
                    double want = 0;
                    for (int j = from; j < to; j++) {
                        const size_t base = (((size_t)layer * numPages + indices[kvIndptr[r] + j / pageSize])
                                             * pageSize + j % pageSize) * width;
                        want += s[j - from] / sum * pool.at(base + c);
                    }
                    worst = std::max(worst, std::fabs(out.at(qRow * rank + c) - want));
                    scale = std::max(scale, std::fabs(want));
                }
            }
        }
    }
    report(name, dt, worst, scale);
}

static void values(int dt, int n, int heads, int rank, int nope, int dv) {
    const int kvBRows = nope + dv;
    Buffer x(dt, (size_t)n * heads * rank, 1.f), kvB(dt, (size_t)heads * kvBRows * rank, 0.1f);
    Buffer out(dt, (size_t)n * heads * dv, 0);
    launch(n * heads, kLatentThreads, [&] {
        latent_values(x.data(), dt, kvB.data(), dt, out.data(), dt, heads, rank, dv, nope, kvBRows);
    });
    double worst = 0, scale = 0;
    for (int t = 0; t < n * heads; t++) {
        const int h = t % heads;
        for (int v = 0; v < dv; v++) {
            double want = 0;
            for (int c = 0; c < rank; c++) {
                want += (double)x.at((size_t)t * rank + c) * kvB.at(((size_t)h * kvBRows + nope + v) * rank + c);
            }
            worst = std::max(worst, std::fabs(out.at((size_t)t * dv + v) - want));
            scale = std::max(scale, std::fabs(want));
        }
    }
    report("latent_values", dt, worst, scale);
}

int main() {
    rng.seed(7);
    for (int dt : {DT_F32, DT_BF16}) {
        append(dt, 5, 64, 16, 1);
        append(dt, 3, 48, 16, 0);
        append(dt, 2, 512, 64, 1);  // DeepSeek-V2-Lite
        query(dt, 3, 2, 32, 16, 64, 24);
        query(dt, 1, 2, 128, 64, 512, 128);
        // a decode row, an empty sequence, a prefill chunk of 6 over a cached prefix of 5 (causal)
        attention("latent_attention causal", dt, 3, 64, 16, 4, {1, 0, 6}, {37, 5, 11}, 1, -1, 0);
        attention("latent_attention window 3", dt, 2, 64, 16, 4, {1, 4}, {9, 13}, 1, 3, 0);
        attention("latent_attention context only", dt, 2, 64, 16, 4, {2, 3}, {9, 7}, 0, -1, 1);
        attention("latent_attention DeepSeek-V2-Lite decode", dt, 2, 512, 64, 16, {1, 1}, {70, 33}, 1, -1, 0);
        values(dt, 3, 2, 64, 8, 24);
        values(dt, 1, 2, 512, 128, 128);
    }
    // the tensor cores, decode rows: one slice per row, then cut (64-key slices: 700 keys in 8, 33 in 1), 32 heads
    const std::vector<int> ones(5, 1), lens{0, 33, 129, 700, 260};
    attention("latent_attention_mma decode one slice", DT_BF16, 16, 512, 64, 64, ones, lens, 1, -1, 0, 1);
    attention("latent_attention_mma decode split", DT_BF16, 16, 512, 64, 64, ones, lens, 1, -1, 0, 8);
    attention("latent_attention_mma 32 heads, page 16", DT_BF16, 32, 512, 64, 16, {1, 1}, {300, 45}, 1, -1, 0, 3);
    attention("latent_attention_mma window 200", DT_BF16, 16, 512, 64, 64, {1, 1}, {700, 150}, 1, 200, 0, 4);
    attention("latent_attention_mma context only", DT_BF16, 16, 512, 64, 64, {1, 1}, {300, 1}, 1, -1, 1, 2);
    // prefill chunks: 40 over a prefix of 90 (causal) beside a decode row and an empty sequence, in one slice and cut
    attention("latent_attention_mma prefill", DT_BF16, 16, 512, 64, 16, {40, 1, 0, 7}, {130, 200, 9, 7}, 1, -1, 0, 1);
    attention("latent_attention_mma prefill split", DT_BF16, 16, 512, 64, 16, {40, 1, 0, 7}, {130, 200, 9, 7}, 1, -1,
              0, 3);
    attention("latent_attention_mma prefill window 50", DT_BF16, 16, 512, 64, 64, {20, 12}, {150, 12}, 1, 50, 0, 2);
    attention("latent_attention_mma prefill context only", DT_BF16, 16, 512, 64, 64, {5, 3}, {100, 3}, 1, -1, 1, 2);
    std::printf(fails ? "latent_attention_checks: %d emulated checks failed\n" : "latent_attention_checks: all passed\n",
                fails);
    return fails != 0;
}
