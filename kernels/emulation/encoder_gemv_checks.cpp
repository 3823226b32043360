// Host emulation checks of the encoder and fused-GEMV kernels (encoder.cu, gemv_fused.cu): each kernel runs on
// the CPU under cuda_host_shim.h and is compared with a plain loop or with the unfused kernels it replaces
// (silu_mul, gelu_tanh_mul, qkv_rope_append), emulated the same way. It checks indexing, control flow and
// roundings where no GPU is at hand; it says nothing about speed or the GPU's memory model. Run: ./run.sh
#include "cuda_host_shim.h"
// every __shared__ array is shared by the threads of the one block that runs at a time
#undef __global__
#define __global__
#undef __shared__
#define __shared__ static
#include "common.cuh"
#include "elementwise.cu"
#include "rope.cu"
#include "encoder.cu"
#include "gemv_fused.cu"
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

// gate_up_act_gemv against the fp32 product followed by silu_mul / gelu_tanh_mul, on aligned and misaligned x
static void check_gate_up() {
    const int k = 72, inter = 37;
    for (int rows = 1; rows <= 4; rows++) {
        for (int geluTanh = 0; geluTanh < 2; geluTanh++) {
            for (int misaligned = 0; misaligned < 2; misaligned++) {
                std::vector<bf16> w(2 * inter * k), xb(rows * k + 8);
                std::vector<float> wf(2 * inter * k), xf(rows * k);
                for (size_t i = 0; i < w.size(); i++) {
                    wf[i] = bf(rnd() * 0.3f);
                    w[i] = __float2bfloat16_rn(wf[i]);
                }
                bf16* x = xb.data() + misaligned;  // 2 bytes off: the kernel's scalar path
                for (int i = 0; i < rows * k; i++) {
                    xf[i] = bf(rnd());
                    x[i] = __float2bfloat16_rn(xf[i]);
                }
                std::vector<float> gateUp(rows * 2 * inter), want(rows * inter), out(rows * inter, NAN);
                for (int r = 0; r < rows; r++) {
                    for (int j = 0; j < 2 * inter; j++) {
                        float s = 0;
                        for (int c = 0; c < k; c++) s += wf[j * k + c] * xf[r * k + c];
                        gateUp[r * 2 * inter + j] = s;
                    }
                }
                launch(1, 256, [&] {
                    if (geluTanh) gelu_tanh_mul(gateUp.data(), DT_F32, want.data(), DT_F32, rows, inter);
                    else silu_mul(gateUp.data(), DT_F32, want.data(), DT_F32, rows, inter);
                });
                launch((inter + 7) / 8, 256, [&] {
                    gate_up_act_gemv(w.data(), x, DT_BF16, out.data(), DT_F32, rows, inter, k, geluTanh);
                });
                for (int i = 0; i < rows * inter; i++) expect_close(out[i], want[i], 1e-4, "gate_up_act_gemv");
            }
        }
    }
}

struct QkvCase {
    int rows, rotaryDim, interleave;
    bool bias;
};

// qkv_rope_append_gemv against the product (+ bias) into qkv followed by qkv_rope_append; T is float or bf16 for
// x, qkv, q and the pool alike. fp32 compares within accumulation-order noise, bf16 expects equal bits.
template <class T>
static void check_qkv(const QkvCase& c, int dt) {
    const int qHeads = 4, kvHeads = 2, headDim = 16, k = 40, layers = 2, pages = 5, pageSize = 4, layer = 1;
    const int width = (qHeads + 2 * kvHeads) * headDim;
    auto store = [&](float v) -> T { if constexpr (sizeof(T) == 4) return v; else return __float2bfloat16_rn(v); };
    auto load = [&](T v) -> float { if constexpr (sizeof(T) == 4) return v; else return __bfloat162float(v); };
    std::vector<float> invFreq(c.rotaryDim / 2);
    for (int i = 0; i < c.rotaryDim / 2; i++) invFreq[i] = (float)std::pow(10000.0, -2.0 * i / c.rotaryDim);
    std::vector<bf16> w(width * k);
    std::vector<float> wf(width * k), bias(width);
    for (size_t i = 0; i < w.size(); i++) {
        wf[i] = bf(rnd() * 0.3f);
        w[i] = __float2bfloat16_rn(wf[i]);
    }
    for (auto& v : bias) v = load(store(rnd()));
    std::vector<T> x(c.rows * k);
    for (auto& v : x) v = store(rnd());
    int pos[3] = {7, 4000, 0}, pageIdx[3] = {3, 0, 4}, offsets[3] = {1, 3, 0};
    size_t poolSize = (size_t)layers * pages * 2 * pageSize * kvHeads * headDim;
    std::vector<T> poolA(poolSize), poolB(poolSize), qkv(c.rows * width), qA(c.rows * qHeads * headDim),
        qB(c.rows * qHeads * headDim);
    for (size_t i = 0; i < poolSize; i++) poolA[i] = poolB[i] = store(rnd());
    for (int r = 0; r < c.rows; r++) {
        for (int j = 0; j < width; j++) {
            float s = 0;
            for (int i = 0; i < k; i++) s += wf[j * k + i] * load(x[r * k + i]);
            qkv[r * width + j] = store(s + (c.bias ? bias[j] : 0.f));
        }
    }
    launch(c.rows, 64, [&] {
        qkv_rope_append(qkv.data(), dt, pos, invFreq.data(), qA.data(), dt, poolA.data(), dt, pageIdx, offsets, layer,
                        pages, pageSize, qHeads, kvHeads, headDim, c.rotaryDim, c.interleave);
    });
    launch((width / 2 + 3) / 4, 128, [&] {
        qkv_rope_append_gemv(w.data(), x.data(), dt, c.bias ? bias.data() : nullptr, DT_F32, dt, pos, invFreq.data(),
                             qB.data(), dt, poolB.data(), dt, pageIdx, offsets, layer, pages, pageSize, c.rows, qHeads,
                             kvHeads, headDim, c.rotaryDim, c.interleave, k);
    });
    double rel = sizeof(T) == 4 ? 1e-4 : 0;
    for (size_t i = 0; i < qA.size(); i++) expect_close(load(qB[i]), load(qA[i]), rel, "qkv_rope_append_gemv q");
    for (size_t i = 0; i < poolSize; i++) expect_close(load(poolB[i]), load(poolA[i]), rel, "qkv_rope_append_gemv pool");
}

int main() {
    check_layer_norm();
    check_gelu();
    check_im2col();
    check_gate_up();
    for (QkvCase c : {QkvCase{3, 16, 0, true}, QkvCase{3, 8, 1, true}, QkvCase{1, 16, 0, false}}) {
        check_qkv<float>(c, DT_F32);
    }
    for (QkvCase c : {QkvCase{3, 16, 0, false}, QkvCase{3, 8, 1, false}}) check_qkv<bf16>(c, DT_BF16);
    std::printf(fails ? "%d emulated checks failed\n" : "all emulated checks pass\n", fails);
    return fails != 0;
}
