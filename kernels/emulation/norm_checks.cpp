// Host emulation checks of rms_norm (norm.cu) and silu_mul (elementwise.cu) after their loops were batched: rms_norm
// runs next to the kernel as it was before (rms_norm_before, below: one element loaded, used and stored at a time).
// Its general path (fp32, mixed dtypes, rows not in 16-byte vectors) must agree with it bit for bit, output and
// residual; the vector path (bf16 weights and output, bf16 or fp32 residual), which sums each thread's squares in
// another order, must give the residual bit for bit and every output within one bf16 step. silu_mul's 16-byte
// bf16 path and its scalar path must give the per-element formula bit for bit. Launch shapes as CudaOps gives
// them. It says nothing about speed or the GPU's memory model. Run: ./run.sh norm_checks
#include "cuda_host_shim.h"
#include "common.cuh"
#include "elementwise.cu"
#include "norm.cu"
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

using namespace mstar;
using bf16 = __nv_bfloat16;

// rms_norm as of commit 6589264.
static void rms_norm_before(const void* x, int xDt, void* residual, int resDt, const void* weight, int wDt, void* out,
                            int outDt, int hidden, float eps) {
    __shared__ float scratch[32];
    __shared__ float invShared;
    const long long base = (long long)blockIdx.x * hidden;
    float ss = 0.f;
    for (int h = threadIdx.x; h < hidden; h += blockDim.x) {
        float a = load_f(x, xDt, base + h);
        if (residual != nullptr) {
            a = round_to(resDt, load_f(residual, resDt, base + h) + a);
            store_f(residual, resDt, base + h, a);
        }
        ss += a * a;
    }
    ss = block_sum(ss, scratch);
    if (threadIdx.x == 0) invShared = (float)(1.0 / sqrt((double)(ss / (float)hidden + eps)));
    __syncthreads();
    const float inv = invShared;
    for (int h = threadIdx.x; h < hidden; h += blockDim.x) {
        const float a = residual != nullptr ? load_f(residual, resDt, base + h) : load_f(x, xDt, base + h);
        store_f(out, outDt, base + h, a * inv * load_f(weight, wDt, h));
    }
}

static std::mt19937 rng(5);
static int fails = 0;

static float rnd() { return std::normal_distribution<float>(0.f, 1.f)(rng); }

// A tensor of n elements of dtype dt (DT_F32 or DT_BF16) as raw bytes, filled with random values.
struct Buffer {
    int dt;
    std::vector<unsigned char> bytes;
    Buffer(int dt, int n) : dt(dt), bytes((size_t)n * (dt == DT_BF16 ? 2 : 4)) {
        for (int i = 0; i < n; i++) store_f(bytes.data(), dt, i, rnd());
    }
    void* data() { return bytes.data(); }
};

static void expect_same(const Buffer& got, const Buffer& want, const char* what, int hidden) {
    if (std::memcmp(got.bytes.data(), want.bytes.data(), got.bytes.size()) != 0) {
        if (fails < 20) std::printf("FAIL %s (hidden %d): bits differ\n", what, hidden);
        fails++;
    }
}

// bf16 buffers whose elements differ by at most one step of bf16 (adjacent bit patterns of the same sign).
static void expect_within_one_step(const Buffer& got, const Buffer& want, const char* what, int hidden) {
    const auto* g = reinterpret_cast<const int16_t*>(got.bytes.data());
    const auto* w = reinterpret_cast<const int16_t*>(want.bytes.data());
    int off = 0;
    for (size_t i = 0; i < got.bytes.size() / 2; i++) off += std::abs(g[i] - w[i]) > 1 || (g[i] < 0) != (w[i] < 0);
    if (off > 0) {
        if (fails < 20) std::printf("FAIL %s (hidden %d): %d elements more than one bf16 step apart\n", what, hidden, off);
        fails++;
    }
}

// CudaOps.threadsFor(hidden, 8)
static unsigned norm_threads(int hidden) {
    long warps = (hidden / 8 + 31) / 32;
    return (unsigned)std::max(32L, std::min(1024L, warps * 32));
}

static void check_rms_norm(int rows, int hidden, int xDt, int resDt, int wDt, int outDt, bool withResidual) {
    Buffer x(xDt, rows * hidden), w(wDt, hidden), res(resDt, rows * hidden);
    Buffer resBefore = res, out(outDt, rows * hidden), outBefore = out;
    const unsigned threads = norm_threads(hidden);
    launch(rows, threads, [&] {
        rms_norm(x.data(), xDt, withResidual ? res.data() : nullptr, resDt, w.data(), wDt, out.data(), outDt, hidden,
                 1e-5f);
    });
    launch(rows, threads, [&] {
        rms_norm_before(x.data(), xDt, withResidual ? resBefore.data() : nullptr, resDt, w.data(), wDt,
                        outBefore.data(), outDt, hidden, 1e-5f);
    });
    // bf16 weights and output: bf16 x with a bf16 or fp32 residual (a bf16 model's layers), or fp32 x alone (its
    // first norm, of the fp32 embeddings)
    const bool vectorPath = wDt == DT_BF16 && outDt == DT_BF16 && hidden % 8 == 0
                            && ((xDt == DT_BF16 && (!withResidual || resDt == DT_BF16 || resDt == DT_F32))
                                || (xDt == DT_F32 && !withResidual));
    if (vectorPath) {
        expect_within_one_step(out, outBefore, "rms_norm bf16 path output", hidden);
    } else {
        expect_same(out, outBefore, "rms_norm output", hidden);
    }
    expect_same(res, resBefore, vectorPath ? "rms_norm bf16 path residual" : "rms_norm residual", hidden);
}

static void check_silu_mul(int rows, int inter, int dt, int offset) {
    // offset elements into the buffers: 1 misaligns the 16-byte path away, taking the scalar one
    Buffer gateUp(dt, offset + rows * 2 * inter), out(dt, offset + rows * inter), want = out;
    auto at = [&](Buffer& b) { return b.bytes.data() + (size_t)offset * (dt == DT_BF16 ? 2 : 4); };
    const long long n = (long long)rows * inter;
    launch((unsigned)std::max(1LL, std::min(132LL * 16, (n + 255) / 256)), 256,
           [&] { silu_mul(at(gateUp), dt, at(out), dt, rows, inter); });
    for (long long r = 0; r < rows; r++) {
        for (int c = 0; c < inter; c++) {
            const float g = load_f(at(gateUp), dt, r * 2 * inter + c), u = load_f(at(gateUp), dt, r * 2 * inter + inter + c);
            store_f(at(want), dt, r * inter + c, g / (1.f + expf(-g)) * u);
        }
    }
    const bool vectorPath = dt == DT_BF16 && inter % 8 == 0 && offset == 0;
    expect_same(out, want, vectorPath ? "silu_mul 16-byte path" : "silu_mul scalar path", inter);
}

int main() {
    for (int hidden : {4096, 2048, 1000, 1004, 128, 8192}) {
        check_rms_norm(3, hidden, DT_BF16, DT_BF16, DT_BF16, DT_BF16, true);
        check_rms_norm(3, hidden, DT_BF16, DT_BF16, DT_BF16, DT_BF16, false);
        check_rms_norm(2, hidden, DT_F32, DT_F32, DT_F32, DT_F32, true);
        check_rms_norm(2, hidden, DT_BF16, DT_F32, DT_F32, DT_BF16, true);  // mixed: the dtype-switch path
        check_rms_norm(3, hidden, DT_BF16, DT_F32, DT_BF16, DT_BF16, true);  // a bf16 model's fp32 residual stream
        check_rms_norm(2, hidden, DT_F32, DT_F32, DT_BF16, DT_BF16, false);  // its embeddings, normalised
    }
    check_silu_mul(3, 1024, DT_BF16, 0);
    check_silu_mul(3, 1024, DT_BF16, 1);
    check_silu_mul(2, 1004, DT_BF16, 0);  // inter not a multiple of 8: the scalar path
    check_silu_mul(2, 512, DT_F32, 0);
    std::printf(fails ? "norm_checks: %d emulated checks failed\n" : "norm_checks: all passed\n", fails);
    return fails != 0;
}
