// Host emulation checks of the batched LoRA kernels (lora.cu): lora_shrink then lora_expand, launched as CudaOps.addLora
// launches them, on the CPU under cuda_host_shim.h. Each call mixes rows of several slots with rows of none (-1) and,
// in one case, a slot outside the stack. Rows of a slot must match a double loop over the same stored inputs (within
// fp32 summation error, plus one rounding to out's dtype); rows of none, and every column outside the target range,
// must be left bit for bit; a slot outside the stack must give NaN in the target columns. fp32 and bf16 tensors,
// ranks 1 to 64, an output column offset inside a wider (fused) output. It checks indexing and arithmetic where no GPU
// is at hand; it says nothing about speed. Run: ./run.sh lora_checks
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

// As CudaOps.addLora: one shrink block of 256 threads per row, the expand over a few blocks of 256 (grid-stride).
static void add_lora(Buffer& x, Buffer& a, Buffer& b, const std::vector<float>& scales, const std::vector<int>& slots,
                     Buffer& out, int stack, int rank, int k, int n, int width, int outCol) {
    const int rows = (int)slots.size();
    std::vector<float> t((size_t)rows * rank, -3.f);
    launch(rows, 256, [&] { lora_shrink(x.data(), x.dt, a.data(), a.dt, slots.data(), t.data(), stack, rank, k); });
    launch(3, 256, [&] {
        lora_expand(t.data(), b.data(), b.dt, scales.data(), slots.data(), out.data(), out.dt, rows, n, rank, width,
                    outCol, stack);
    });
}

static void check(const char* name, int dt, int outDt, int rank, int k, int n, int width, int outCol,
                  std::vector<int> slots) {
    const int stack = 3, rows = (int)slots.size();
    Buffer x(dt, (size_t)rows * k, 1.f), a(dt, (size_t)stack * rank * k, 0.2f), b(dt, (size_t)stack * n * rank, 0.2f);
    std::vector<float> scales = {0.5f, 2.f, 1.25f};
    Buffer out(outDt, (size_t)rows * width, 1.f);
    const Buffer before = out;
    add_lora(x, a, b, scales, slots, out, stack, rank, k, n, width, outCol);
    int wrong = 0;
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        const int s = slots[r];
        for (int c = 0; c < width; c++) {
            const size_t o = (size_t)r * width + c;
            const bool target = c >= outCol && c < outCol + n;
            if (s < 0 || !target) {
                const size_t bytes = outDt == DT_BF16 ? 2 : 4;
                if (std::memcmp(&out.bytes[o * bytes], &before.bytes[o * bytes], bytes) != 0) wrong++;
                continue;
            }
            if (s >= stack) {
                if (!std::isnan(out.at(o))) wrong++;
                continue;
            }
            const int j = c - outCol;
            double sum = 0, magnitude = 0;
            for (int q = 0; q < rank; q++) {
                double t = 0, tAbs = 0;
                for (int i = 0; i < k; i++) {
                    const double p = (double)x.at((size_t)r * k + i) * a.at(((size_t)s * rank + q) * k + i);
                    t += p;
                    tAbs += std::fabs(p);
                }
                const double bq = b.at(((size_t)s * n + j) * rank + q);
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

int main() {
    rng.seed(42);
    // decode-like: one row per request, slots mixed and repeated, a row of none between them
    check("fp32 rank 8, q columns of a fused qkv", DT_F32, DT_F32, 8, 96, 64, 128, 0, {0, 2, -1, 2, 1});
    check("fp32 rank 16, v columns of a fused qkv", DT_F32, DT_F32, 16, 64, 32, 128, 96, {1, -1, 0});
    check("bf16 rank 64, up columns of a fused gate/up", DT_BF16, DT_BF16, 64, 128, 48, 96, 48, {2, 2, 0, -1, 1});
    check("bf16 weights into an fp32 output", DT_BF16, DT_F32, 4, 80, 40, 40, 0, {0, 1, 2});
    check("rank 1", DT_F32, DT_F32, 1, 33, 17, 20, 3, {1, 0});
    // prefill-like: runs of rows of one request
    check("bf16 prefill runs", DT_BF16, DT_BF16, 12, 64, 24, 24, 0, {0, 0, 0, -1, -1, 2, 2, 2, 2});
    check("a slot outside the stack", DT_F32, DT_F32, 8, 32, 16, 16, 0, {0, 3, -1});
    std::printf(fails ? "lora_checks: %d emulated checks failed\n" : "lora_checks: all passed\n", fails);
    return fails != 0;
}
