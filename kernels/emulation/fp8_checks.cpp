// Host emulation checks of the FP8-weight kernels (fp8_matmul.cu, fp8_tile_matmul.cu), launched as CudaFp8Matmul and
// Fp8TileMatmul launch them, on the CPU under cuda_host_shim.h and warp_mma_shim.h. Every E4M3 code must decode to the
// value of the OCP table (NaN codes to NaN), also through the fp16 conversion the skinny kernel uses;
// fp8_dequantize_bf16 must write code · scale rounded once to bf16, 16 codes at a time or one; each fp8_skinny_matmul
// instantiation (one or two 16-row weight tiles a block: _r2, which must also give its one-tile twin's bits) must match
// a double loop over the same weights rounded to bf16 within fp32 summation error (plus one rounding to out's dtype),
// with a bias and without, fp32 and bf16 outputs, for 128 × 128 blocks, one scale a row and one a tensor, weights of a
// row count that is not a multiple of 16, and row counts that leave x tiles partly empty. So must fp8_tile_matmul (17
// to 64 rows: 17, 23, 32, 33, 48, 57, 64) in one slice of K and in several added by fp8_tile_reduce, over weights of a
// row count that is not a multiple of its 128; and its rows 17 (m4) and 64 (m8) must give the rows they share the same
// bits. It checks fragment layouts, indexing and arithmetic where no GPU is at hand; it says nothing about speed or the
// tensor cores' own summation order. Run: ./run.sh fp8_checks
#define MSTAR_HOST_EMULATION
#include "warp_mma_shim.h"
using std::max;
using std::min;
#include <vector_functions.h>
#include "fp8_matmul.cu"
#include "fp8_tile_matmul.cu"
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

static void check_dequantize(int n, int k, int br, int bc) {
    Weight w(n, k, br, bc);
    std::vector<__nv_bfloat16> out((size_t)n * k);
    launch(7, 256, [&] { fp8_dequantize_bf16(w.codes.data(), w.scales.data(), br, bc, out.data(), n, k); });
    int wrong = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < k; j++) {
            const float want = round_to(DT_BF16, w.at(i, j));
            const float got = __bfloat162float(out[(size_t)i * k + j]);
            if (got != want && wrong++ < 3) std::printf("  dequantize (%d, %d): %g, expected %g\n", i, j, got, want);
        }
    }
    std::printf("%s dequantize %dx%d blocks %dx%d\n", wrong ? "FAIL" : "ok  ", n, k, br, bc);
    fails += wrong != 0;
}

using Fp8Kernel = void (*)(const __nv_bfloat16*, const unsigned char*, const float*, int, int, const void*, int, void*,
                          int, int, int, int);

struct Product {
    int rows;
    Weight w;
    std::vector<__nv_bfloat16> x;
    std::vector<float> bias;
    Product(int rows, int n, int k, int br, int bc) : rows(rows), w(n, k, br, bc), x((size_t)rows * k), bias(n) {
        std::normal_distribution<float> normal(0.f, 1.f);
        for (auto& v : x) v = __float2bfloat16_rn(normal(rng));
        for (auto& v : bias) v = normal(rng);
    }
    // out against a double loop over the weights rounded to bf16, within fp32 summation error over k terms plus one
    // rounding to out's dtype
    void check(const char* name, const std::vector<unsigned char>& out, int outDt, bool withBias) const {
        int wrong = 0;
        double worst = 0;
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < w.n; c++) {
                double want = withBias ? bias[c] : 0, mag = std::abs(want);
                for (int j = 0; j < w.k; j++) {
                    // the tensor cores multiply the weight rounded once to bf16
                    const double p = (double)__bfloat162float(x[(size_t)r * w.k + j]) * round_to(DT_BF16, w.at(c, j));
                    want += p;
                    mag += std::abs(p);
                }
                const double got = load_f(out.data(), outDt, (long long)r * w.n + c);
                const double tol = mag * (w.k * 1.2e-7) + (outDt == DT_BF16 ? std::abs(want) * 0.0040 : 0) + 1e-6;
                worst = std::max(worst, std::abs(got - want) / tol);
                if (!(std::abs(got - want) <= tol) && wrong++ < 3) {
                    std::printf("  (%d, %d): %g, expected %g\n", r, c, got, want);
                }
            }
        }
        std::printf("%s %s out %s rows %d, %dx%d blocks %dx%d%s (worst %.2f of tolerance)\n", wrong ? "FAIL" : "ok  ",
                    name, outDt == DT_BF16 ? "bf16" : "f32", rows, w.n, w.k, w.blockRows, w.blockCols,
                    withBias ? " bias" : "", worst);
        fails += wrong != 0;
    }
};

// out = p's product through a fp8_skinny_matmul kernel of `tiles` 16-row weight tiles a block.
static std::vector<unsigned char> skinny_product(Fp8Kernel kernel, int tiles, const Product& p, int outDt,
                                                 bool withBias) {
    std::vector<unsigned char> out((size_t)p.rows * p.w.n * 4);
    launch((p.w.n + 16 * tiles - 1) / (16 * tiles), 32 * kFp8Warps, [&] {
        kernel(p.x.data(), p.w.codes.data(), p.w.scales.data(), p.w.blockRows, p.w.blockCols,
               withBias ? p.bias.data() : nullptr, DT_F32, out.data(), outDt, p.rows, p.w.n, p.w.k);
    });
    return out;
}

static void check_matmul(Fp8Kernel kernel, const char* name, int outDt, int rows, int n, int k, int br, int bc,
                         bool withBias) {
    Product p(rows, n, k, br, bc);
    p.check(name, skinny_product(kernel, 1, p, outDt, withBias), outDt, withBias);
}

// A kernel of two weight tiles a block (_r2) must give its one-tile twin's bits.
static void check_two_tiles(Fp8Kernel one, Fp8Kernel two, const char* name, int rows, int n, int k, int br, int bc) {
    Product p(rows, n, k, br, bc);
    const auto a = skinny_product(one, 1, p, DT_F32, true);
    const auto b = skinny_product(two, 2, p, DT_F32, true);
    const bool same = a == b;
    std::printf("%s %s gives its one-tile twin's bits, rows %d, %dx%d blocks %dx%d\n", same ? "ok  " : "FAIL", name,
                rows, n, k, br, bc);
    fails += !same;
}

using TileKernel = void (*)(const __nv_bfloat16*, const unsigned char*, const float*, int, int, const void*, int,
                            void*, int, float*, int, int, int);

// out = p's product through fp8_tile_matmul (MT 8-row tiles of x) in `splits` slices of K, launched as
// CudaFp8Matmul launches it: one split stores out itself, more go through fp8_tile_reduce.
static std::vector<unsigned char> tile_product(TileKernel kernel, const Product& p, int outDt, int splits,
                                               bool withBias) {
    const int n = p.w.n, k = p.w.k;
    std::vector<unsigned char> out((size_t)p.rows * n * 4);
    std::vector<float> partial((size_t)splits * p.rows * n, NAN);
    const void* bias = withBias ? p.bias.data() : nullptr;
    launch3({(unsigned)((n + kTileRows - 1) / kTileRows), (unsigned)splits, 1}, 32 * kTileWarps, [&] {
        kernel(p.x.data(), p.w.codes.data(), p.w.scales.data(), p.w.blockRows, p.w.blockCols, bias, DT_F32,
               out.data(), outDt, partial.data(), p.rows, n, k);
    });
    if (splits > 1) {
        launch(5, 64, [&] { fp8_tile_reduce(partial.data(), splits, bias, DT_F32, out.data(), outDt, p.rows, n); });
    }
    return out;
}

static void check_tile(TileKernel kernel, const char* name, int outDt, int rows, int n, int k, int br, int bc,
                       int splits, bool withBias) {
    Product p(rows, n, k, br, bc);
    char label[64];
    std::snprintf(label, sizeof label, "%s splits %d", name, splits);
    p.check(label, tile_product(kernel, p, outDt, splits, withBias), outDt, withBias);
}

// A row's bits do not depend on the row count: x's first 17 rows alone (m4) and under 47 more (m8, a 64-row x
// whose first rows are the same) must give the same outputs for those rows.
static void check_tile_rows_invariant(int n, int k, int splits) {
    Product all(64, n, k, 1, k);
    Product first(17, n, k, 1, k);
    first.w = all.w;
    first.bias = all.bias;
    std::copy(all.x.begin(), all.x.begin() + (size_t)17 * k, first.x.begin());
    const auto a = tile_product(fp8_tile_matmul_m8, all, DT_F32, splits, true);
    const auto b = tile_product(fp8_tile_matmul_m4, first, DT_F32, splits, true);
    const bool same = std::memcmp(a.data(), b.data(), (size_t)17 * n * 4) == 0;
    std::printf("%s tile rows 17 (m4) and 64 (m8) give rows 0-16 the same bits, %dx%d splits %d\n",
                same ? "ok  " : "FAIL", n, k, splits);
    fails += !same;
}

static void check_pair_decode() {
    for (unsigned b = 0; b < 256; b += 2) {
        const uint32_t pair = dequantize_pair(b | ((b + 1) << 8), 1.f);
        const float lo = __bfloat162float(__ushort_as_bfloat16((unsigned short)(pair & 0xFFFF)));
        const float hi = __bfloat162float(__ushort_as_bfloat16((unsigned short)(pair >> 16)));
        for (auto [code, got] : {std::pair{b, lo}, std::pair{b + 1, hi}}) {
            const double want = e4m3(code);
            if (std::isnan(want) ? !std::isnan(got) : (double)got != want) {
                std::printf("FAIL pair decode 0x%02x: %g, expected %g\n", code, got, want);
                fails++;
            }
        }
    }
}

int main() {
    check_decode();
    check_pair_decode();
    check_dequantize(200, 256, 128, 128);
    check_dequantize(77, 96, 1, 96);
    check_dequantize(64, 160, 64, 160);
    check_dequantize(9, 40, 1, 40);
    check_dequantize(33, 72, 16, 24);
    check_matmul(fp8_skinny_matmul_m1, "m1", DT_BF16, 1, 40, 512, 128, 128, false);
    check_matmul(fp8_skinny_matmul_m1, "m1", DT_F32, 5, 24, 384, 128, 128, true);
    check_matmul(fp8_skinny_matmul_m2, "m2", DT_BF16, 16, 37, 640, 1, 640, true);
    check_matmul(fp8_skinny_matmul_m2, "m2", DT_F32, 9, 19, 192, 1, 192, false);
    check_matmul(fp8_skinny_matmul_m1_r2, "m1_r2", DT_BF16, 3, 72, 512, 128, 128, true);
    check_matmul(fp8_skinny_matmul_m2_r2, "m2_r2", DT_F32, 13, 40, 384, 1, 384, false);
    check_two_tiles(fp8_skinny_matmul_m1, fp8_skinny_matmul_m1_r2, "m1_r2", 1, 80, 640, 128, 128);
    check_two_tiles(fp8_skinny_matmul_m2, fp8_skinny_matmul_m2_r2, "m2_r2", 11, 37, 256, 1, 256);
    check_tile(fp8_tile_matmul_m4, "tile m4", DT_BF16, 17, 256, 512, 128, 128, 1, true);
    check_tile(fp8_tile_matmul_m4, "tile m4", DT_F32, 32, 200, 640, 1, 640, 3, false);
    check_tile(fp8_tile_matmul_m4, "tile m4", DT_F32, 23, 130, 448, 130, 448, 2, true);
    check_tile(fp8_tile_matmul_m8, "tile m8", DT_BF16, 48, 256, 1024, 128, 128, 4, true);
    check_tile(fp8_tile_matmul_m8, "tile m8", DT_F32, 64, 136, 384, 1, 384, 1, false);
    check_tile(fp8_tile_matmul_m8, "tile m8", DT_BF16, 33, 96, 320, 96, 320, 5, false);
    check_tile(fp8_tile_matmul_m8, "tile m8", DT_F32, 57, 128, 256, 128, 128, 2, true);
    check_tile_rows_invariant(160, 512, 3);
    if (fails) {
        std::printf("%d checks FAILED\n", fails);
        return 1;
    }
    std::printf("all FP8 matmul checks passed\n");
}
