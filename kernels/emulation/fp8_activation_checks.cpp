// Host emulation checks of the per-token FP8 quantisation kernels (fp8_activations.cu), launched as CudaFp8Rows
// launches them (one block a row, up to 32 elements a thread), on the CPU under cuda_host_shim.h. The reference is
// Fp8Rows.quantise as the Java host defines it: scale = amax / 448 in fp32 (1 for a row of zeros), code = the E4M3
// value nearest x / scale (fp32 division), ties to the even code, saturated at ±448; so fp8_quantize_rows and
// silu_mul_fp8 must give its codes and scales bit for bit (this also checks that cuda_fp8.h's conversion rounds and
// saturates as the Java encoder does), and the bf16 round trip decode(code) · scale rounded once. rms_norm_fp8 sums
// its squares in the block's order, so its scale must be within an fp32 rounding of the reference's and each code at
// most one step away. fp8_rows_dequantize_bf16 and fp8_broadcast_scale must write their formula. It says nothing about
// speed. Run: ./run.sh fp8_activation_checks
#define MSTAR_HOST_EMULATION
#include "warp_mma_shim.h"
using std::max;
using std::min;
#include <vector_functions.h>
#include "fp8_matmul.cu"
#include "fp8_activations.cu"
#include <cstdio>
#include <random>
#include <vector>

using namespace mstar;
using bf16 = __nv_bfloat16;

static std::mt19937 rng(11);
static int fails = 0;

// The 127 non-negative finite E4M3 values, ascending: a code is its index.
static std::vector<float> e4m3_values() {
    std::vector<float> v;
    for (unsigned b = 0; b <= 0x7E; b++) v.push_back(e4m3_to_float(b));
    return v;
}

// Float8E4m3.encode: nearest code, ties to the even code, saturated; no NaN inputs here.
static unsigned char encode(float x) {
    static const std::vector<float> values = e4m3_values();
    const unsigned sign = std::signbit(x) ? 0x80u : 0u;
    const float a = std::fabs(x);
    if (a >= 448.f) return (unsigned char)(sign | 0x7E);
    const auto it = std::lower_bound(values.begin(), values.end(), a);
    int above = (int)(it - values.begin());
    if (values[above] == a) return (unsigned char)(sign | above);
    const int below = above - 1;
    const double twice = 2.0 * a, sum = (double)values[below] + values[above];
    const int code = twice < sum ? below : twice > sum ? above : (below % 2 == 0 ? below : above);
    return (unsigned char)(sign | code);
}

// Fp8Rows.quantise of one row: its scale; codes written to `codes`.
static float quantise(const float* v, int len, unsigned char* codes) {
    float amax = 0.f;
    for (int i = 0; i < len; i++) amax = std::max(amax, std::fabs(v[i]));
    const float scale = amax > 0 ? amax / 448.f : 1.f;
    for (int i = 0; i < len; i++) codes[i] = encode(v[i] / scale);
    return scale;
}

static unsigned threads_for(int width) {
    const long long warps = ((width + 31) / 32 + 31) / 32;
    return (unsigned)std::max(128LL, std::min(1024LL, warps * 32));
}

static void report(bool ok, const char* what, int rows, int width) {
    std::printf("%s %s %dx%d\n", ok ? "ok  " : "FAIL", what, rows, width);
    fails += !ok;
}

static void check_quantize_rows(int rows, int k, float spread) {
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<bf16> x((size_t)rows * k);
    for (size_t i = 0; i < x.size(); i++) {
        // rows of very different magnitudes, some values tiny (subnormal codes), one row all zeros
        const int r = (int)(i / k);
        x[i] = __float2bfloat16_rn(r == 1 ? 0.f : normal(rng) * std::ldexp(spread, r % 7 - 3));
    }
    std::vector<unsigned char> codes(x.size());
    std::vector<float> scales(rows);
    std::vector<bf16> roundTrip(x.size());
    launch(rows, threads_for(k), [&] { fp8_quantize_rows(x.data(), DT_BF16, codes.data(), scales.data(),
                                                         roundTrip.data(), k); });
    bool ok = true;
    std::vector<float> v(k);
    std::vector<unsigned char> want(k);
    for (int r = 0; r < rows && ok; r++) {
        for (int j = 0; j < k; j++) v[j] = __bfloat162float(x[(size_t)r * k + j]);
        const float scale = quantise(v.data(), k, want.data());
        ok = scale == scales[r];
        for (int j = 0; j < k && ok; j++) {
            ok = want[j] == codes[(size_t)r * k + j]
                 && __bfloat162float(roundTrip[(size_t)r * k + j]) == round_to(DT_BF16, e4m3_to_float(want[j]) * scale);
            if (!ok) std::printf("  row %d col %d: code 0x%02x, expected 0x%02x\n", r, j, codes[(size_t)r * k + j], want[j]);
        }
    }
    report(ok, "fp8_quantize_rows (bit for bit)", rows, k);
}

static void check_silu_mul(int rows, int inter) {
    std::normal_distribution<float> normal(0.f, 2.f);
    std::vector<bf16> gateUp((size_t)rows * 2 * inter);
    for (auto& g : gateUp) g = __float2bfloat16_rn(normal(rng));
    std::vector<unsigned char> codes((size_t)rows * inter);
    std::vector<float> scales(rows);
    launch(rows, threads_for(inter), [&] { silu_mul_fp8(gateUp.data(), DT_BF16, codes.data(), scales.data(), inter); });
    bool ok = true;
    std::vector<float> v(inter);
    std::vector<unsigned char> want(inter);
    for (int r = 0; r < rows && ok; r++) {
        for (int i = 0; i < inter; i++) {
            v[i] = silu_times(__bfloat162float(gateUp[(size_t)r * 2 * inter + i]),
                              __bfloat162float(gateUp[(size_t)r * 2 * inter + inter + i]));
        }
        ok = quantise(v.data(), inter, want.data()) == scales[r]
             && std::equal(want.begin(), want.end(), codes.begin() + (size_t)r * inter);
    }
    report(ok, "silu_mul_fp8 (bit for bit)", rows, inter);
}

static void check_rms_norm(int rows, int hidden, bool withResidual) {
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<bf16> x((size_t)rows * hidden), w(hidden);
    std::vector<float> residual((size_t)rows * hidden), residualRef;
    for (auto& e : x) e = __float2bfloat16_rn(normal(rng) * 3);
    for (auto& e : w) e = __float2bfloat16_rn(normal(rng));
    for (auto& e : residual) e = normal(rng);
    residualRef = residual;
    std::vector<unsigned char> codes((size_t)rows * hidden);
    std::vector<float> scales(rows);
    launch(rows, threads_for(hidden), [&] {
        rms_norm_fp8(x.data(), DT_BF16, withResidual ? residual.data() : nullptr, DT_F32, w.data(), DT_BF16,
                     codes.data(), scales.data(), hidden, 1e-5f);
    });
    bool ok = true;
    int moved = 0;
    std::vector<float> v(hidden);
    std::vector<unsigned char> want(hidden);
    for (int r = 0; r < rows && ok; r++) {
        double ss = 0;
        for (int h = 0; h < hidden; h++) {
            float a = __bfloat162float(x[(size_t)r * hidden + h]);
            if (withResidual) a = residualRef[(size_t)r * hidden + h] += a;
            v[h] = a;
            ss += (double)a * a;
        }
        const float inv = (float)(1.0 / std::sqrt(ss / hidden + 1e-5));
        for (int h = 0; h < hidden; h++) v[h] = v[h] * inv * __bfloat162float(w[h]);
        const float scale = quantise(v.data(), hidden, want.data());
        ok = std::fabs(scales[r] - scale) <= scale * 1e-5f;
        for (int h = 0; h < hidden && ok; h++) {
            const unsigned char got = codes[(size_t)r * hidden + h];
            // one step: adjacent codes of one sign are adjacent integers (a zero may meet either sign's smallest)
            const int d = std::abs((int)(got & 0x7F) - (int)(want[h] & 0x7F));
            ok = d == 0 || (d == 1 && ((got ^ want[h]) & 0x80) == 0) || (got & 0x7F) + (want[h] & 0x7F) <= 1;
            moved += got != want[h];
        }
    }
    if (withResidual) ok = ok && residual == residualRef;
    std::printf("  rms_norm_fp8: %d codes one step from the double reference\n", moved);
    report(ok, withResidual ? "rms_norm_fp8 with residual (codes within a step)" : "rms_norm_fp8 (codes within a step)",
           rows, hidden);
}

static void check_dequantize_and_broadcast(int rows, int k) {
    std::uniform_int_distribution<int> code(0, 255);
    std::vector<unsigned char> codes((size_t)rows * k);
    for (auto& c : codes) {
        do { c = (unsigned char)code(rng); } while ((c & 0x7F) == 0x7F);
    }
    std::vector<float> scales(rows);
    for (int r = 0; r < rows; r++) scales[r] = 0.001f * (r + 1);
    std::vector<bf16> out(codes.size());
    launch(5, 256, [&] { fp8_rows_dequantize_bf16(codes.data(), scales.data(), out.data(), rows, k); });
    bool ok = true;
    for (size_t e = 0; e < codes.size() && ok; e++) {
        ok = __bfloat162float(out[e]) == round_to(DT_BF16, e4m3_to_float(codes[e]) * scales[e / k]);
    }
    report(ok, "fp8_rows_dequantize_bf16", rows, k);
    std::vector<float> perRow(1000, 0.f);
    const float scale = 0.37f;
    launch(4, 256, [&] { fp8_broadcast_scale(&scale, perRow.data(), 1000); });
    report(std::all_of(perRow.begin(), perRow.end(), [&](float s) { return s == scale; }), "fp8_broadcast_scale", 1,
           1000);
}

int main() {
    check_quantize_rows(9, 4096, 1.f);
    check_quantize_rows(3, 100, 1e-3f);
    check_quantize_rows(2, 14336, 50.f);
    check_silu_mul(3, 14336);
    check_silu_mul(5, 72);
    check_rms_norm(4, 4096, true);
    check_rms_norm(3, 200, false);
    check_dequantize_and_broadcast(7, 96);
    if (fails) {
        std::printf("%d checks FAILED\n", fails);
        return 1;
    }
    std::printf("all FP8 activation checks passed\n");
}
