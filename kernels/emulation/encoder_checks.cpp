// Host emulation checks of the encoder kernels (encoder.cu): each kernel runs on the CPU under cuda_host_shim.h and
// is compared with a plain loop. It checks indexing, control flow and roundings where no GPU is at hand; it says
// nothing about speed or the GPU's memory model. Run: ./run.sh
#include "cuda_host_shim.h"
#include "common.cuh"
#include "encoder.cu"
#include <cstdio>
#include <random>

using namespace mstar;
using bf16 = __nv_bfloat16;

static std::mt19937 rng(7);
static int fails = 0;

static float rnd() { return std::normal_distribution<float>(0.f, 1.f)(rng); }
static float bf(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

static void expect_close(double got, double want, double rel, const char* what) {
    if (!(std::fabs(got - want) <= rel * (1 + std::fabs(want)))) {
        if (fails < 20) std::printf("FAIL %s: got %g, want %g\n", what, got, want);
        fails++;
    }
}

// nn.LayerNorm of one row in double
static void layer_norm_row(const float* v, const float* w, const float* b, int h, double* out) {
    double mean = 0, var = 0;
    for (int j = 0; j < h; j++) mean += v[j];
    mean /= h;
    for (int j = 0; j < h; j++) var += (v[j] - mean) * (v[j] - mean);
    var /= h;
    for (int j = 0; j < h; j++) out[j] = (v[j] - mean) / std::sqrt(var + 1e-5) * w[j] + (b ? b[j] : 0);
}

static void check_layer_norm() {
    const int rows = 3, h = 383;
    std::vector<float> x(rows * h), res(rows * h), w(h), b(h), out(rows * h, NAN), sum(rows * h);
    for (auto& v : x) v = rnd() + 3;
    for (auto& v : res) v = rnd();
    for (auto& v : w) v = rnd();
    for (auto& v : b) v = rnd();
    for (int i = 0; i < rows * h; i++) sum[i] = res[i] + x[i];
    launch(rows, 64, [&] {
        layer_norm(x.data(), DT_F32, res.data(), DT_F32, w.data(), DT_F32, b.data(), DT_F32, out.data(), DT_F32, h,
                   1e-5f);
    });
    std::vector<double> want(h);
    for (int r = 0; r < rows; r++) {
        layer_norm_row(&sum[r * h], w.data(), b.data(), h, want.data());
        for (int j = 0; j < h; j++) {
            expect_close(out[r * h + j], want[j], 1e-4, "layer_norm + residual");
            expect_close(res[r * h + j], sum[r * h + j], 0, "layer_norm residual stream");
        }
    }
    // bf16, in place, no residual, no bias
    std::vector<bf16> xb(rows * h);
    std::vector<float> xf(rows * h);
    for (int i = 0; i < rows * h; i++) {
        xf[i] = bf(rnd() * 2 - 1);
        xb[i] = __float2bfloat16_rn(xf[i]);
    }
    launch(rows, 64, [&] {
        layer_norm(xb.data(), DT_BF16, nullptr, 0, w.data(), DT_F32, nullptr, 0, xb.data(), DT_BF16, h, 1e-5f);
    });
    for (int r = 0; r < rows; r++) {
        layer_norm_row(&xf[r * h], w.data(), nullptr, h, want.data());
        for (int j = 0; j < h; j++) expect_close(__bfloat162float(xb[r * h + j]), want[j], 1e-2, "layer_norm bf16");
    }
}

static void check_gelu() {
    const int n = 1000;
    std::vector<float> x(n), out(n);
    for (auto& v : x) v = rnd() * 3;
    launch(3, 128, [&] { gelu_exact(x.data(), DT_F32, out.data(), DT_F32, n); });
    // the host's erfcf with an fp32 argument sets the tolerance on the far tail, not the kernel
    for (int i = 0; i < n; i++) {
        double want = x[i] * 0.5 * std::erfc(-x[i] / std::sqrt(2.0));
        if (!(std::fabs(out[i] - want) <= 2e-5 * std::fabs(want))) expect_close(out[i], want, 0, "gelu");
    }
}

static void check_im2col() {
    const int frames = 37, channels = 5, kernel = 3, stride = 2, padding = 1;
    const long long outFrames = (frames + 2 * padding - kernel) / stride + 1;
    std::vector<float> x(frames * channels), cols(outFrames * channels * kernel, NAN);
    for (auto& v : x) v = rnd();
    launch(2, 256, [&] {
        conv1d_im2col(x.data(), DT_F32, cols.data(), frames, channels, kernel, stride, padding, outFrames);
    });
    for (long long t = 0; t < outFrames; t++) {
        for (int c = 0; c < channels; c++) {
            for (int k = 0; k < kernel; k++) {
                long long src = t * stride + k - padding;
                float want = src >= 0 && src < frames ? x[src * channels + c] : 0.f;
                expect_close(cols[(t * channels + c) * kernel + k], want, 0, "conv1d_im2col");
            }
        }
    }
}

int main() {
    check_layer_norm();
    check_gelu();
    check_im2col();
    std::printf(fails ? "%d emulated checks failed\n" : "all emulated checks pass\n", fails);
    return fails != 0;
}
