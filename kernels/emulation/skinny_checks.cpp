// Host emulation checks of the skinny matmul (skinny_matmul.cu): its five instantiations (plain and pipelined
// bodies, one to four 8-row tiles of x) run on the CPU under cuda_host_shim.h and warp_mma_shim.h, launched as
// SkinnyMatmul launches them. The plain product must match a double loop; the gated epilogue (act SiLU or
// GELU-tanh, gate and up rows paired in each tile) must give, bit for bit, the same instantiation's plain product
// stored in out's dtype followed by the activation — with an intermediate size that is not a multiple of 8 and
// row counts that leave x tiles partly empty. The qkv epilogue (RoPE pairs in each tile, q and the pool written)
// must give, bit for bit, the same instantiation's plain product in bf16 followed by qkv_rope_append (rope.cu), NeoX
// and interleaved, head dims 32 and 64. It checks fragment layouts, row pairing and indexing where no GPU is at
// hand; it says nothing about speed or about the tensor cores' own summation order. Run: ./run.sh skinny_checks
#define MSTAR_HOST_EMULATION
#include "warp_mma_shim.h"
using std::max;
using std::min;
#include <vector_functions.h>
#include "skinny_matmul.cu"
#include "rope.cu"
#include <cstdio>
#include <random>

using namespace mstar;
using bf16 = __nv_bfloat16;

using SkinnyKernel = void (*)(const bf16*, const bf16*, void*, int, const void*, int, int, int, int, int);
using QkvRopeKernel = void (*)(const bf16*, const bf16*, int, int, const int*, const float*, bf16*, bf16*, const int*,
                               const int*, int, int, int, int, int, int, int, int);

static int fails = 0;
static std::mt19937 rng(17);

static std::vector<bf16> random_bf16(size_t n, float scale) {
    std::vector<bf16> v(n);
    for (bf16& e : v) e = __float2bfloat16_rn(scale * std::normal_distribution<float>(0.f, 1.f)(rng));
    return v;
}

static float stored(int dt, float v) { return dt == DT_BF16 ? __bfloat162float(__float2bfloat16_rn(v)) : v; }

static std::vector<float> run(SkinnyKernel kernel, const std::vector<bf16>& x, const std::vector<bf16>& w, int m,
                              int n, int k, int outDt, int act, const std::vector<float>* bias = nullptr) {
    const int cols = act == ACT_NONE ? n : n / 2;
    std::vector<float> f32((size_t)m * cols, -7.f);
    std::vector<bf16> b16((size_t)m * cols, __float2bfloat16_rn(-7.f));
    void* out = outDt == DT_BF16 ? (void*)b16.data() : (void*)f32.data();
    const unsigned blocks = act == ACT_NONE ? (n + 15) / 16 : (n / 2 + 7) / 8;
    const void* b = bias == nullptr ? nullptr : bias->data();
    launch(blocks, 32 * kSkinnyWarps, [&] { kernel(x.data(), w.data(), out, outDt, b, DT_F32, m, n, k, act); });
    if (outDt == DT_BF16) {
        for (size_t i = 0; i < f32.size(); i++) f32[i] = __bfloat162float(b16[i]);
    }
    return f32;
}

static void check(const char* name, SkinnyKernel kernel, int m, int inter, int k) {
    const int n = 2 * inter;
    const std::vector<bf16> x = random_bf16((size_t)m * k, 1.f), w = random_bf16((size_t)n * k, 0.05f);
    const std::vector<float> plain = run(kernel, x, w, m, n, k, DT_F32, ACT_NONE);
    double worst = 0;
    for (int r = 0; r < m; r++) {
        for (int c = 0; c < n; c++) {
            double want = 0;
            for (int i = 0; i < k; i++) {
                want += (double)__bfloat162float(x[(size_t)r * k + i]) * __bfloat162float(w[(size_t)c * k + i]);
            }
            worst = std::max(worst, std::fabs(plain[(size_t)r * n + c] - want));
        }
    }
    if (worst > 1e-4) {
        std::printf("FAIL %s plain product, %d rows: max |diff| %.3g against the double loop\n", name, m, worst);
        fails++;
    }
    // a bias joins the fp32 sum before its one rounding: the plain fp32 product plus the bias, rounded
    std::vector<float> bias(n);
    for (float& b : bias) b = std::normal_distribution<float>(0.f, 1.f)(rng);
    for (int outDt : {DT_BF16, DT_F32}) {
        const std::vector<float> biased = run(kernel, x, w, m, n, k, outDt, ACT_NONE, &bias);
        int differ = 0;
        for (int r = 0; r < m; r++) {
            for (int c = 0; c < n; c++) {
                const float want = stored(outDt, plain[(size_t)r * n + c] + bias[c]);
                if (std::memcmp(&want, &biased[(size_t)r * n + c], 4) != 0) differ++;
            }
        }
        if (differ) {
            std::printf("FAIL %s plain product + bias (%s out), %d rows: %d of %d outputs differ\n", name,
                        outDt == DT_BF16 ? "bf16" : "fp32", m, differ, m * n);
            fails++;
        }
    }
    for (int outDt : {DT_BF16, DT_F32}) {
        const std::vector<float> sums = run(kernel, x, w, m, n, k, outDt, ACT_NONE);
        for (int act : {ACT_SILU, ACT_GELU_TANH}) {
            const std::vector<float> gated = run(kernel, x, w, m, n, k, outDt, act);
            int differ = 0;
            for (int r = 0; r < m; r++) {
                for (int c = 0; c < inter; c++) {
                    const float g = sums[(size_t)r * n + c], u = sums[(size_t)r * n + inter + c];
                    const float want = stored(outDt, act == ACT_SILU ? silu_times(g, u) : gelu_tanh_times(g, u));
                    const float got = gated[(size_t)r * inter + c];
                    if (std::memcmp(&want, &got, 4) != 0) differ++;
                }
            }
            if (differ) {
                std::printf("FAIL %s gated (act %d, %s out), %d rows, I %d: %d of %d outputs differ from the plain "
                            "product + activation\n", name, act, outDt == DT_BF16 ? "bf16" : "fp32", m, inter, differ,
                            m * inter);
                fails++;
            }
        }
    }
}

static bool same_bits(const std::vector<bf16>& a, const std::vector<bf16>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)) == 0;
}

// The fused qkv + RoPE + append against the plain product into a bf16 qkv and qkv_rope_append, launched as CudaOps
// launches it, each into a pool of 2 layers x 8 pages x 2 x 4 slots (the step's tokens in slots of layer 1).
static void check_qkv_rope(const char* name, SkinnyKernel plain, QkvRopeKernel fused, int m, int headDim,
                           int interleave) {
    const int qHeads = 4, kvHeads = 2, k = 256, n = (qHeads + 2 * kvHeads) * headDim;
    const int layer = 1, pages = 8, pageSize = 4, tokenElems = kvHeads * headDim;
    const std::vector<bf16> x = random_bf16((size_t)m * k, 1.f), w = random_bf16((size_t)n * k, 0.05f);
    std::vector<int> pos(m), pageIdx(m), offsets(m);
    for (int t = 0; t < m; t++) {
        pos[t] = (int)(rng() % 9000);
        pageIdx[t] = (5 * (t / pageSize) + 3) % pages;
        offsets[t] = t % pageSize;
    }
    std::vector<float> invFreq(headDim / 2);
    for (int i = 0; i < headDim / 2; i++) invFreq[i] = (float)std::pow(500000.0, -2.0 * i / headDim);
    const bf16 poison = __float2bfloat16_rn(-3.f);
    std::vector<bf16> qFused((size_t)m * qHeads * headDim, poison), qPair = qFused;
    std::vector<bf16> poolFused((size_t)2 * pages * 2 * pageSize * tokenElems, poison), poolPair = poolFused;
    std::vector<bf16> qkv((size_t)m * n);
    launch(n / 16, 32 * kSkinnyWarps, [&] {
        fused(x.data(), w.data(), m, k, pos.data(), invFreq.data(), qFused.data(), poolFused.data(), pageIdx.data(),
              offsets.data(), layer, pages, pageSize, qHeads, kvHeads, headDim, interleave, 0);
    });
    launch(n / 16, 32 * kSkinnyWarps, [&] { plain(x.data(), w.data(), qkv.data(), DT_BF16, nullptr, 0, m, n, k, ACT_NONE); });
    const unsigned ropeThreads = (unsigned)std::max(32L, std::min(1024L, ((long)n / 8 + 31) / 32 * 32));
    launch(m, ropeThreads, [&] {
        qkv_rope_append(qkv.data(), DT_BF16, pos.data(), invFreq.data(), qPair.data(), DT_BF16, poolPair.data(),
                        DT_BF16, pageIdx.data(), offsets.data(), layer, pages, pageSize, qHeads, kvHeads, headDim,
                        headDim, interleave, 0);
    });
    if (!same_bits(qFused, qPair) || !same_bits(poolFused, poolPair)) {
        std::printf("FAIL %s qkv + RoPE epilogue, %d rows, head dim %d, %s: q %s, pool %s the plain product + "
                    "qkv_rope_append\n", name, m, headDim, interleave ? "interleaved" : "NeoX",
                    same_bits(qFused, qPair) ? "equal to" : "differs from",
                    same_bits(poolFused, poolPair) ? "equal to" : "differs from");
        fails++;
    }
}

int main() {
    const struct {
        const char* name;
        SkinnyKernel kernel;
        int rows[2];
    } kernels[] = {
        {"m1", skinny_matmul_bf16_m1, {1, 5}},           {"m2", skinny_matmul_bf16_m2, {9, 16}},
        {"m4", skinny_matmul_bf16_m4, {17, 30}},         {"m1_pipe", skinny_matmul_bf16_m1_pipe, {1, 8}},
        {"m2_pipe", skinny_matmul_bf16_m2_pipe, {3, 13}},
    };
    for (const auto& kc : kernels) {
        for (int rows : kc.rows) {
            check(kc.name, kc.kernel, rows, 40, 1024);  // 16 chunks of K over 8 warps
            check(kc.name, kc.kernel, rows, 36, 192);   // I % 8 = 4: the last tile's rows past I; 3 chunks
        }
    }
    const struct {
        const char* name;
        SkinnyKernel plain;
        QkvRopeKernel fused;
        int rows;
    } qkvKernels[] = {
        {"m1", skinny_matmul_bf16_m1, skinny_qkv_rope_bf16_m1, 3},
        {"m2", skinny_matmul_bf16_m2, skinny_qkv_rope_bf16_m2, 16},
        {"m4", skinny_matmul_bf16_m4, skinny_qkv_rope_bf16_m4, 21},
        {"m1_pipe", skinny_matmul_bf16_m1_pipe, skinny_qkv_rope_bf16_m1_pipe, 1},
        {"m2_pipe", skinny_matmul_bf16_m2_pipe, skinny_qkv_rope_bf16_m2_pipe, 11},
    };
    for (const auto& kc : qkvKernels) {
        for (int headDim : {32, 64}) {
            for (int interleave : {0, 1}) check_qkv_rope(kc.name, kc.plain, kc.fused, kc.rows, headDim, interleave);
        }
    }
    std::printf(fails ? "skinny_checks: %d emulated checks failed\n" : "skinny_checks: all passed\n", fails);
    return fails != 0;
}
