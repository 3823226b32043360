// Host emulation checks of the split-KV decode attention kernels (attention_decode.cu): the tensor-core bf16
// kernels and the CUDA-core one run on the CPU under cuda_host_shim.h and warp_mma_shim.h and are compared
// with a plain double loop, over sequences of 1 to 2600 keys (one slice, several, merged by the last block)
// in a pool whose pages lie in random order, with the grid cut as CudaAttention cuts it for a GPU of 1 or 8
// SMs, and a sliding window; and the CUDA-core kernel over an FP8 (E4M3) pool, against the same loop over the
// codes' values. It checks fragment layouts, indexing, slicing and the merge where no GPU is at
// hand; it says nothing about speed or the GPU's memory model. Run: ./run.sh
#define MSTAR_HOST_EMULATION
#include "warp_mma_shim.h"
using std::max;
using std::min;
#include <vector_functions.h>
#include "attention_decode.cu"
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

using namespace mstar;
using bf16 = __nv_bfloat16;

static int fails = 0;

using DecodeKernel = void (*)(const bf16*, const void*, const int*, const int*, const int*, const int*, int, int, int,
                              int, int, int, int, int, float, int, int, bf16*, float*, float*, int*);

// One layer of a pool [2 layers, pages, 2, page, kvHeads, d] with the batch's pages in random order.
struct Batch {
    int heads, kvHeads, d, page = 16, layer = 1, pages;
    std::vector<int> lens, qo, kvIndptr, indices, last;
    std::vector<bf16> pool, q;
    std::vector<E4m3> codes;  // the pool's values quantised, for the FP8-pool kernels

    Batch(int heads, int kvHeads, int d, std::vector<int> lengths, std::mt19937& rng)
        : heads(heads), kvHeads(kvHeads), d(d), lens(std::move(lengths)) {
        const int rows = lens.size();
        qo.resize(rows + 1);
        kvIndptr.assign(rows + 1, 0);
        last.resize(rows);
        for (int r = 0; r < rows; ++r) {
            qo[r + 1] = r + 1;
            kvIndptr[r + 1] = kvIndptr[r] + (lens[r] + page - 1) / page;
            last[r] = lens[r] - (kvIndptr[r + 1] - kvIndptr[r] - 1) * page;
        }
        pages = kvIndptr[rows] + 3;
        std::vector<int> order(pages);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        indices.assign(order.begin(), order.begin() + kvIndptr[rows]);
        std::uniform_real_distribution<float> u(-1.7f, 1.7f);
        pool.resize((size_t)2 * pages * 2 * page * kvHeads * d);
        q.resize((size_t)rows * heads * d);
        for (auto& v : pool) v = __float2bfloat16(u(rng));
        for (auto& v : q) v = __float2bfloat16(u(rng));
        codes.resize(pool.size());
        for (size_t i = 0; i < pool.size(); ++i) codes[i].code = e4m3_code(__bfloat162float(pool[i]));
    }

    size_t row(int r, int t, int kv, int g) const {
        const int p = indices[kvIndptr[r] + t / page];
        return ((((size_t)layer * pages + p) * 2 + kv) * page + t % page) * kvHeads * d + (size_t)g * d;
    }

    double value(size_t i, bool fp8) const {
        return fp8 ? e4m3_value(codes[i].code) : __bfloat162float(pool[i]);
    }

    // softmax(q k / sqrt(d)) v over keys [max(0, len - 1 - window), len), in double, over the bf16 pool or its codes
    std::vector<double> reference(int window, bool fp8) const {
        std::vector<double> out(q.size());
        for (size_t r = 0; r < lens.size(); ++r) {
            for (int h = 0; h < heads; ++h) {
                const int g = h / (heads / kvHeads), lo = window >= 0 ? max(0, lens[r] - 1 - window) : 0;
                std::vector<double> s(lens[r] - lo);
                double mx = -1e300, total = 0;
                const bf16* qh = &q[(r * heads + h) * d];
                for (int t = lo; t < lens[r]; ++t) {
                    double dot = 0;
                    const size_t k = row(r, t, 0, g);
                    for (int e = 0; e < d; ++e) dot += (double)__bfloat162float(qh[e]) * value(k + e, fp8);
                    s[t - lo] = dot / std::sqrt((double)d);
                    mx = max(mx, s[t - lo]);
                }
                for (auto& v : s) total += v = std::exp(v - mx);
                for (int e = 0; e < d; ++e) {
                    double o = 0;
                    for (int t = lo; t < lens[r]; ++t) o += s[t - lo] * value(row(r, t, 1, g) + e, fp8);
                    out[(r * heads + h) * d + e] = o / total;
                }
            }
        }
        return out;
    }
};

// Runs the kernel on the grid CudaAttention.decode launches for sms SMs of blocksPerSm blocks and compares.
static void check(const char* name, DecodeKernel kernel, int threads, int gh, int blocksPerSm, const Batch& b, int sms,
                  int window, bool fp8 = false) {
    const int rows = b.lens.size(), blocksPerRow = b.kvHeads * (b.heads / b.kvHeads / gh);
    const int span0 = *std::max_element(b.lens.begin(), b.lens.end());
    const int span = window >= 0 ? min(span0, window + 1) : span0;
    // CudaAttention.decodeSplits, maxSlices, gridWidth
    const long long blocks = (long long)rows * blocksPerRow;
    const int splits = max(1, min((int)max(1LL, blocksPerSm * (long long)sms / blocks),
                                  (span + kMinSplitKeys - 1) / kMinSplitKeys));
    const int sliceKeys = min(kMaxSliceKeys, (kSplitPages - 1) * b.page);
    const int slices = max(splits, (span + sliceKeys - 1) / sliceKeys);
    const long long waves = (4LL * blocksPerSm * sms + blocks - 1) / blocks;
    const int width = (int)max<long long>(splits, min<long long>(slices, waves));

    std::vector<bf16> out(b.q.size(), __float2bfloat16(NAN));
    std::vector<float> partialO((size_t)rows * b.heads * slices * b.d), partialLse((size_t)rows * b.heads * slices);
    std::vector<int> done(rows * blocksPerRow, 0);
    launch3(Dim3{(unsigned)width, (unsigned)blocksPerRow, (unsigned)rows}, threads, [&] {
        kernel(b.q.data(), fp8 ? static_cast<const void*>(b.codes.data()) : b.pool.data(), b.qo.data(), b.kvIndptr.data(), b.indices.data(), b.last.data(), b.layer,
               b.pages, b.page, b.heads, b.kvHeads, 1, window, 0, 1.f / std::sqrt((float)b.d), splits, slices,
               out.data(), partialO.data(), partialLse.data(), done.data());
    });
    // per output row (sequence, head): bf16 outputs and (tensor cores) bf16 softmax weights stay within a few
    // 1e-3 of the row's largest element
    const std::vector<double> want = b.reference(window, fp8);
    double worst = 0;
    for (size_t row = 0; row < out.size() / b.d; ++row) {
        double maxWant = 0, maxDiff = 0;
        for (int e = 0; e < b.d; ++e) {
            const size_t i = row * b.d + e;
            maxWant = max(maxWant, std::fabs(want[i]));
            const double diff = std::fabs(__bfloat162float(out[i]) - want[i]);
            maxDiff = std::isnan(diff) ? INFINITY : max(maxDiff, diff);
        }
        worst = max(worst, maxDiff / maxWant);
    }
    const bool ok = worst <= 1e-2 && std::all_of(done.begin(), done.end(), [](int v) { return v == 0; });
    fails += !ok;
    std::printf("%s %-24s %d SMs, %d splits, %d slices, window %4d: max |diff| / max |want| of a row %.2e\n",
                ok ? "ok  " : "FAIL", name, sms, splits, slices, window, worst);
}

int main() {
    std::mt19937 rng(7);
    const Batch llama(8, 2, 128, {1, 37, 300, 2600}, rng);  // Llama-3's group of 4 and head dim, 2 KV heads
    check("tc bf16 d128 g4", attn_decode_tc_bf16_d128_g4, kTcDecodeWarps * 32, 4, 4, llama, 1, -1);
    check("tc bf16 d128 g4", attn_decode_tc_bf16_d128_g4, kTcDecodeWarps * 32, 4, 4, llama, 8, -1);
    check("tc bf16 d128 g4", attn_decode_tc_bf16_d128_g4, kTcDecodeWarps * 32, 4, 4, llama, 8, 100);
    check("cuda-core bf16 d128 g4", attn_decode_bf16_d128_g4, kDecodeWarps * 32, 4, 4, llama, 8, -1);
    check("cuda-core e4m3 d128 g4", attn_decode_e4m3_d128_g4, kDecodeWarps * 32, 4, 4, llama, 8, -1, true);
    check("cuda-core e4m3 d128 g4", attn_decode_e4m3_d128_g4, kDecodeWarps * 32, 4, 4, llama, 1, 100, true);
    const Batch group8(16, 2, 64, {5, 700}, rng);  // every column of the mma's 8-wide operand a head
    check("tc bf16 d64 g8", attn_decode_tc_bf16_d64_g8, kTcDecodeWarps * 32, 8, 6, group8, 8, -1);
    check("cuda-core e4m3 d64 g4", attn_decode_e4m3_d64_g4, kDecodeWarps * 32, 4, 4, group8, 8, -1, true);
    const Batch group1(4, 4, 64, {129, 16}, rng);  // one head: columns 1..7 padding
    check("tc bf16 d64 g1", attn_decode_tc_bf16_d64_g1, kTcDecodeWarps * 32, 1, 6, group1, 1, -1);
    check("cuda-core e4m3 d64 g1", attn_decode_e4m3_d64_g1, kDecodeWarps * 32, 1, 4, group1, 1, -1, true);
    std::printf(fails ? "%d FAILED\n" : "all passed\n", fails);
    return fails != 0;
}
