// Host emulation checks of the batched LoRA kernels (lora.cu): lora_shrink then lora_expand, launched as
// CudaOps.addLoraGroup launches them, on the CPU under cuda_host_shim.h, for one module and for two or three modules of
// one input in one launch. Each call mixes rows of several slots with rows of none (-1), some runs of rows cross the
// kernels' 64-row windows, and two cases have a slot outside the stack. Rows of a slot must match a double loop over
// the same stored inputs (within fp32 summation error, plus one rounding to out's dtype); rows of none, and every column
// outside the target ranges, must be left bit for bit; a slot outside the stack must give NaN in the target columns.
// fp32 and bf16 tensors (bf16 through the 16-byte loads), ranks 1 to 64 (past the expand's 32 in registers), output
// column offsets inside a wider (fused) output. It checks indexing and arithmetic where no GPU is at hand; it says
// nothing about speed. Run: ./run.sh lora_checks
#include "cuda_host_shim.h"
#include "common.cuh"
#include "lora.cu"
#include "random_buffer.h"
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

using namespace mstar;

static int fails = 0;

// As CudaOps.addLoraGroup: a shrink block of 256 threads per (row, module, ranksPerBlock ranks), an expand block of
// 256 per (row, 1024 columns of the modules together).
static void add_lora(Buffer& x, std::vector<Buffer>& a, std::vector<Buffer>& b, const std::vector<float>& scales,
                     const std::vector<int>& slots, Buffer& out, int stack, int rank, int k, const std::vector<int>& ns,
                     const std::vector<int>& cols, int width, int ranksPerBlock) {
    const int rows = (int)slots.size(), groups = (int)a.size();
    std::vector<float> t((size_t)rows * groups * rank, -3.f);
    const void* as[3] = {a[0].data(), groups > 1 ? a[1].data() : nullptr, groups > 2 ? a[2].data() : nullptr};
    const void* bs[3] = {b[0].data(), groups > 1 ? b[1].data() : nullptr, groups > 2 ? b[2].data() : nullptr};
    int n[3] = {0, 0, 0}, c[3] = {0, 0, 0}, total = 0;
    for (int g = 0; g < groups; g++) {
        n[g] = ns[g];
        c[g] = cols[g];
        total += ns[g];
    }
    launch(rows * groups * ((rank + ranksPerBlock - 1) / ranksPerBlock), 256, [&] {
        lora_shrink(x.data(), x.dt, as[0], as[1], as[2], a[0].dt, groups, slots.data(), t.data(), rows, stack, rank, k,
                    ranksPerBlock);
    });
    launch(rows * ((total + 1023) / 1024), 256, [&] {
        lora_expand(t.data(), bs[0], bs[1], bs[2], b[0].dt, n[0], n[1], n[2], c[0], c[1], c[2], groups, scales.data(),
                    slots.data(), out.data(), out.dt, rows, rank, width, stack);
    });
}

// Modules g of widths ns[g] into the columns from cols[g] of an output of the given width, all reading one x.
static void check(const char* name, int dt, int outDt, int rank, int k, std::vector<int> ns, std::vector<int> cols,
                  int width, std::vector<int> slots) {
    const int stack = 3, rows = (int)slots.size(), groups = (int)ns.size();
    Buffer x(dt, (size_t)rows * k, 1.f);
    std::vector<Buffer> a, b;
    for (int g = 0; g < groups; g++) {
        a.emplace_back(dt, (size_t)stack * rank * k, 0.2f);
        b.emplace_back(dt, (size_t)stack * ns[g] * rank, 0.2f);
    }
    std::vector<float> scales = {0.5f, 2.f, 1.25f};
    Buffer out(outDt, (size_t)rows * width, 1.f);
    const Buffer before = out;
    add_lora(x, a, b, scales, slots, out, stack, rank, k, ns, cols, width, 8);
    // the shrink's sums must not depend on how many ranks a block takes (decode launches take 1, prefill 8)
    Buffer one = before;
    add_lora(x, a, b, scales, slots, one, stack, rank, k, ns, cols, width, 1);
    if (one.bytes != out.bytes) {
        std::printf("FAIL %s: one rank a shrink block differs from eight\n", name);
        fails++;
    }
    int wrong = 0;
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        const int s = slots[r];
        for (int c = 0; c < width; c++) {
            const size_t o = (size_t)r * width + c;
            int g = -1;
            for (int h = 0; h < groups; h++) {
                if (c >= cols[h] && c < cols[h] + ns[h]) g = h;
            }
            if (s < 0 || g < 0) {
                const size_t bytes = outDt == DT_BF16 ? 2 : 4;
                if (std::memcmp(&out.bytes[o * bytes], &before.bytes[o * bytes], bytes) != 0) wrong++;
                continue;
            }
            if (s >= stack) {
                if (!std::isnan(out.at(o))) wrong++;
                continue;
            }
            const int j = c - cols[g], n = ns[g];
            double sum = 0, magnitude = 0;
            for (int q = 0; q < rank; q++) {
                double t = 0, tAbs = 0;
                for (int i = 0; i < k; i++) {
                    const double p = (double)x.at((size_t)r * k + i) * a[g].at(((size_t)s * rank + q) * k + i);
                    t += p;
                    tAbs += std::fabs(p);
                }
                const double bq = b[g].at(((size_t)s * n + j) * rank + q);
                sum += t * bq;
                magnitude += tAbs * std::fabs(bq);
            }
            const double want = before.at(o) + scales[s] * sum;
            // fp32 sums of k and rank terms, then one rounding to out's dtype
            const double tol = 1e-5 * (std::fabs(before.at(o)) + scales[s] * magnitude)
                               + (outDt == DT_BF16 ? std::fabs(want) / 128 : 0);
            const double diff = std::fabs(out.at(o) - want);
            worst = std::max(worst, diff);
            if (!(diff <= tol)) wrong++;
        }
    }
    if (wrong) {
        std::printf("FAIL %s: %d outputs wrong (worst |diff| %.3g)\n", name, wrong, worst);
        fails++;
    }
}

// Runs of rows of one slot, as prefill chunks bring them, past several 64-row windows.
static std::vector<int> runs(std::initializer_list<std::pair<int, int>> slotAndLength) {
    std::vector<int> slots;
    for (auto [s, n] : slotAndLength) slots.insert(slots.end(), n, s);
    return slots;
}

int main() {
    rng.seed(42);
    // decode-like: one row per request, slots mixed and repeated, a row of none between them
    check("fp32 rank 8, q columns of a fused qkv", DT_F32, DT_F32, 8, 96, {64}, {0}, 128, {0, 2, -1, 2, 1});
    check("fp32 rank 16, v columns of a fused qkv", DT_F32, DT_F32, 16, 64, {32}, {96}, 128, {1, -1, 0});
    check("bf16 rank 64, up columns of a fused gate/up", DT_BF16, DT_BF16, 64, 128, {48}, {48}, 96, {2, 2, 0, -1, 1});
    check("bf16 weights into an fp32 output", DT_BF16, DT_F32, 4, 80, {40}, {0}, 40, {0, 1, 2});
    check("rank 1", DT_F32, DT_F32, 1, 33, {17}, {3}, 20, {1, 0});
    // several modules of one input in one launch: q, k and v; gate and up; ranks below, at and past a chunk of eight
    check("bf16 q, k and v of a fused qkv, rank 16", DT_BF16, DT_BF16, 16, 128, {64, 32, 32}, {0, 64, 96}, 128,
          {0, 2, -1, 2, 1, 0});
    check("bf16 k and v only, rank 8", DT_BF16, DT_BF16, 8, 64, {16, 16}, {32, 48}, 64, {1, 1, -1, 0});
    check("fp32 gate and up, rank 12", DT_F32, DT_F32, 12, 72, {40, 40}, {0, 40}, 80, {2, 0, 2, -1});
    check("bf16 gate and up past an expand block's 1024 columns, rank 40", DT_BF16, DT_BF16, 40, 64, {1100, 1100},
          {0, 1100}, 2200, {0, 1, 0});
    // prefill-like: runs of rows of one request, some across a 64-row window's edge, and a slot that comes back
    check("bf16 prefill runs", DT_BF16, DT_BF16, 12, 64, {24}, {0}, 24, {0, 0, 0, -1, -1, 2, 2, 2, 2});
    check("bf16 runs past 64-row windows, q/k/v", DT_BF16, DT_BF16, 16, 64, {16, 8, 8}, {0, 16, 24}, 32,
          runs({{0, 50}, {-1, 10}, {2, 70}, {1, 3}, {0, 30}}));
    // K past one round of the shrink's eight 256-element slices (bf16: 16-byte vectors; fp32: single elements)
    check("bf16 rank 16, K 4096", DT_BF16, DT_BF16, 16, 4096, {64}, {0}, 64, {0, 1, 0, 2, -1, 0, 0, 0, 0, 0, 0, 0});
    check("fp32 rank 8, K 2000", DT_F32, DT_F32, 8, 2000, {32}, {0}, 32, {2, 2, 1});
    check("a slot outside the stack", DT_F32, DT_F32, 8, 32, {16}, {0}, 16, {0, 3, -1});
    check("a slot outside the stack, two modules", DT_BF16, DT_BF16, 8, 32, {16, 8}, {0, 16}, 24, {3, 0, 3, -1});
    std::printf(fails ? "lora_checks: %d emulated checks failed\n" : "lora_checks: all passed\n", fails);
    return fails != 0;
}
