// Host emulation checks of the FP8-weight kernels (fp8_matmul.cu), launched as CudaFp8Matmul launches them, on the
// CPU under cuda_host_shim.h. Every E4M3 code must decode to the value of the OCP table (NaN codes to NaN);
// fp8_dequantize must write code · scale rounded once to fp32 / bf16; fp8_skinny_matmul must match a double loop
// over the same dequantised weights within fp32 summation error (plus one rounding to out's dtype), with a bias and
// without, fp32 and bf16 activations and outputs, for 128 × 128 blocks, one scale a row and one a tensor, and row
// counts across tiles (1, 5, 16, 17, 40). It checks indexing and arithmetic where no GPU is at hand; it says nothing
// about speed. Run: ./run.sh fp8_checks
#include "cuda_host_shim.h"
#include "common.cuh"
#include "fp8_matmul.cu"
#include <cstdio>
#include <random>
#include <vector>

using namespace mstar;

static std::mt19937 rng(7);
static int fails = 0;

// The reference decoding: sign, 4 exponent bits of bias 7, 3 mantissa bits; exponent 0 subnormal; 0x7F/0xFF NaN.
static double e4m3(unsigned b) {
    const int e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN;
    const double mag = e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1 + m / 8.0) * std::ldexp(1.0, e - 7);
    return (b & 0x80) ? -mag : mag;
}

struct Weight {
    int n, k, blockRows, blockCols, scaleCols;
    std::vector<unsigned char> codes;
    std::vector<float> scales;
    Weight(int n, int k, int br, int bc) : n(n), k(k), blockRows(br), blockCols(bc), scaleCols((k + bc - 1) / bc),
            codes((size_t)n * k), scales((size_t)((n + br - 1) / br) * scaleCols) {
        std::uniform_int_distribution<int> code(0, 255);
        for (auto& c : codes) {
            do { c = (unsigned char)code(rng); } while ((c & 0x7F) == 0x7F); // no NaN codes in weights
        }
        std::uniform_real_distribution<float> s(0.0005f, 0.004f);
        for (auto& v : scales) v = s(rng);
    }
    float at(int i, int j) const { return (float)e4m3(codes[(size_t)i * k + j]) * scales[(size_t)(i / blockRows) * scaleCols + j / blockCols]; }
};

static void check_decode() {
    for (unsigned b = 0; b < 256; b++) {
        const double want = e4m3(b);
        const float got = e4m3_to_float(b);
        if (std::isnan(want) ? !std::isnan(got) : (double)got != want) {
            std::printf("FAIL decode 0x%02x: %g, expected %g\n", b, got, want);
            fails++;
        }
    }
}

static void check_dequantize(int outDt, int n, int k, int br, int bc) {
    Weight w(n, k, br, bc);
    std::vector<unsigned char> out((size_t)n * k * (outDt == DT_BF16 ? 2 : 4));
    launch(7, 256, [&] { fp8_dequantize(w.codes.data(), w.scales.data(), br, bc, out.data(), outDt, n, k); });
    int wrong = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < k; j++) {
            const float want = round_to(outDt, w.at(i, j));
            const float got = load_f(out.data(), outDt, (long long)i * k + j);
            if (got != want && wrong++ < 3) std::printf("  dequantize (%d, %d): %g, expected %g\n", i, j, got, want);
        }
    }
    std::printf("%s dequantize %s %dx%d blocks %dx%d\n", wrong ? "FAIL" : "ok  ", outDt == DT_BF16 ? "bf16" : "f32", n, k, br, bc);
    fails += wrong != 0;
}

static void check_matmul(int xDt, int outDt, int rows, int n, int k, int br, int bc, bool withBias) {
    Weight w(n, k, br, bc);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<unsigned char> x((size_t)rows * k * 4), bias((size_t)n * 4), out((size_t)rows * n * 4);
    for (long long i = 0; i < (long long)rows * k; i++) store_f(x.data(), xDt, i, normal(rng));
    for (int i = 0; i < n; i++) store_f(bias.data(), DT_F32, i, normal(rng));
    const int rowTiles = (rows + kFp8RowTile - 1) / kFp8RowTile;
    const int blocks = (n + kFp8Threads / 32 - 1) / (kFp8Threads / 32) * rowTiles;
    launch(blocks, kFp8Threads, [&] {
        fp8_skinny_matmul(x.data(), xDt, w.codes.data(), w.scales.data(), br, bc, withBias ? bias.data() : nullptr,
                          DT_F32, out.data(), outDt, rows, n, k);
    });
    int wrong = 0;
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < n; c++) {
            double want = withBias ? load_f(bias.data(), DT_F32, c) : 0, mag = std::abs(want);
            for (int j = 0; j < k; j++) {
                const double p = (double)load_f(x.data(), xDt, (long long)r * k + j) * w.at(c, j);
                want += p;
                mag += std::abs(p);
            }
            const double got = load_f(out.data(), outDt, (long long)r * n + c);
            // fp32 summation error over k terms, plus one rounding to bf16
            const double tol = mag * (k * 1.2e-7) + (outDt == DT_BF16 ? std::abs(want) * 0.0079 : 0) + 1e-6;
            worst = std::max(worst, std::abs(got - want) / (tol));
            if (std::abs(got - want) > tol && wrong++ < 3) std::printf("  (%d, %d): %g, expected %g\n", r, c, got, want);
        }
    }
    std::printf("%s skinny x %s out %s rows %d, %dx%d blocks %dx%d%s (worst %.2f of tolerance)\n", wrong ? "FAIL" : "ok  ",
                xDt == DT_BF16 ? "bf16" : "f32", outDt == DT_BF16 ? "bf16" : "f32", rows, n, k, br, bc,
                withBias ? " bias" : "", worst);
    fails += wrong != 0;
}

int main() {
    check_decode();
    check_dequantize(DT_F32, 200, 256, 128, 128);
    check_dequantize(DT_BF16, 77, 96, 1, 96);
    check_dequantize(DT_BF16, 64, 160, 64, 160);
    for (int rows : {1, 5, 16, 17, 40}) {
        check_matmul(DT_BF16, DT_BF16, rows, 40, 512, 128, 128, false);
    }
    check_matmul(DT_F32, DT_F32, 3, 24, 384, 128, 128, true);
    check_matmul(DT_BF16, DT_F32, 9, 33, 272, 1, 272, true);
    check_matmul(DT_F32, DT_BF16, 2, 19, 144, 19, 144, false);
    check_matmul(DT_BF16, DT_BF16, 20, 130, 256, 128, 128, true);
    if (fails) {
        std::printf("%d checks FAILED\n", fails);
        return 1;
    }
    std::printf("all FP8 matmul checks passed\n");
}
