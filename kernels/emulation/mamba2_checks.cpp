// Host emulation checks of the Mamba2 kernels (mamba2.cu), launched as CudaOps launches them, on the CPU under
// warp_mma_shim.h, against a token-by-token recurrence in double: the causal conv1d continuing from stored windows
// (segments of 1 to 37 tokens, one of none), the chunked scan over segments shorter and longer than its chunk (16 or
// 32 tokens) with heads of one and two channel tiles and states of 8 to 256, continuing from stored states, the decode
// step (heads of 4 to 70 channels, one or two passes of a warp's channels, fp32 and bf16 states), and the gated RMSNorm
// of one and of several groups. Outputs and the states left in the slots must match within fp32 summation error (plus
// one rounding for bf16 tensors); slots no segment names must be left bit for bit. It checks indexing and arithmetic
// where no GPU is at hand; it says nothing about speed. Run: ./run.sh mamba2_checks
#define MSTAR_HOST_EMULATION
#include "warp_mma_shim.h"
#include <algorithm>
using std::min;
#include "common.cuh"
#include "mamba2.cu"
#include "random_buffer.h"
#include <cstdio>
#include <vector>

using namespace mstar;

static int fails = 0;

struct Shape {
    int heads, headDim, groups, state, k;
    int inner() const { return heads * headDim; }
    int conv() const { return inner() + 2 * groups * state; }
    int width() const { return inner() + conv() + heads; }
};

static double silu(double v) { return v / (1 + std::exp(-v)); }
static double softplus(double v) { return v > 20 ? v : std::log1p(std::exp(v)); }

static void report(const char* name, int wrong, double worst) {
    if (wrong) {
        std::printf("FAIL %s: %d values wrong (worst |diff| %.3g)\n", name, wrong, worst);
        fails++;
    }
}

static bool close(double got, double want, double magnitude, int dt) {
    return std::fabs(got - want) <= 2e-5 * magnitude + (dt == DT_BF16 ? std::fabs(want) / 128 : 0) + 1e-6;
}

// Segments of the given lengths at the given slots of a pool of `slotCount`, xBC taken from proj as the scan reads it.
static void conv_check(const char* name, int dt, Shape s, std::vector<int> lengths, std::vector<int> slots,
                       int slotCount) {
    std::vector<int> starts{0};
    for (int n : lengths) starts.push_back(starts.back() + n);
    const int tokens = starts.back(), conv = s.conv(), k = s.k, segs = (int)slots.size();
    Buffer proj(dt, (size_t)tokens * s.width(), 1.f), w(dt, (size_t)conv * k, 0.5f), b(dt, conv, 0.5f);
    Buffer states(DT_F32, (size_t)slotCount * conv * (k - 1), 1.f), out(dt, (size_t)tokens * conv, 1.f);
    const Buffer before = states;
    const int runs = tokens > segs ? kConvRuns : 1, channels = kConvThreads / runs;  // as CudaStateSpace picks
    launch(segs * ((conv + channels - 1) / channels), kConvThreads, [&] {
        mamba_causal_conv1d(proj.data(), dt, w.data(), dt, b.data(), dt, states.data(), DT_F32, slots.data(),
                            starts.data(), out.data(), dt, segs, conv, k, s.width(), s.inner(), runs);
    });
    int wrong = 0;
    double worst = 0;
    std::vector<bool> named(slotCount, false);
    for (int i = 0; i < segs; i++) {
        named[slots[i]] = true;
        for (int c = 0; c < conv; c++) {
            std::vector<double> in;
            for (int j = 0; j < k - 1; j++) in.push_back(before.at(((size_t)slots[i] * conv + c) * (k - 1) + j));
            for (int t = starts[i]; t < starts[i + 1]; t++) {
                in.push_back(proj.at((size_t)t * s.width() + s.inner() + c));
            }
            for (int t = starts[i]; t < starts[i + 1]; t++) {
                double acc = b.at(c), mag = std::fabs(b.at(c));
                for (int j = 0; j < k; j++) {
                    const double p = w.at((size_t)c * k + j) * in[t - starts[i] + j];
                    acc += p;
                    mag += std::fabs(p);
                }
                const double want = silu(acc), got = out.at((size_t)t * conv + c);
                worst = std::max(worst, std::fabs(got - want));
                if (!close(got, want, mag, dt)) wrong++;
            }
            for (int j = 0; j < k - 1; j++) {
                const double want = in[in.size() - (k - 1) + j];
                if (states.at(((size_t)slots[i] * conv + c) * (k - 1) + j) != (float)want) wrong++;
            }
        }
    }
    for (int sl = 0; sl < slotCount; sl++) {
        if (named[sl]) continue;
        for (int e = 0; e < conv * (k - 1); e++) {
            if (states.at((size_t)sl * conv * (k - 1) + e) != before.at((size_t)sl * conv * (k - 1) + e)) wrong++;
        }
    }
    report(name, wrong, worst);
}

// The scan (or, with decode, the step: every segment one token) against the recurrence in double.
static void scan_check(const char* name, int dt, Shape s, std::vector<int> lengths, std::vector<int> slots,
                       int slotCount, bool decode, float dtMax, int stDt = DT_F32, int splits = 1) {
    std::vector<int> starts{0};
    for (int n : lengths) starts.push_back(starts.back() + n);
    const int tokens = starts.back(), segs = (int)slots.size(), conv = s.conv(), inner = s.inner();
    const size_t stateSize = (size_t)s.heads * s.headDim * s.state;
    Buffer xbc(dt, (size_t)tokens * conv, 1.f), proj(dt, (size_t)tokens * s.width(), 1.f);
    Buffer aLog(DT_F32, s.heads, 0.5f), dtBias(DT_F32, s.heads, 0.5f), d(DT_F32, s.heads, 1.f);
    Buffer states(stDt, slotCount * stateSize, 1.f), y(dt, (size_t)tokens * inner, 1.f);
    const Buffer before = states;
    const float dtMin = 0.f;
    if (decode) {
        const auto step = s.state <= 64    ? mamba_ssm_step_n64
                          : s.state <= 128 ? mamba_ssm_step_n128
                                           : mamba_ssm_step_n256;
        launch(segs * s.heads * splits, kStepThreads, [&] {
            step(xbc.data(), dt, proj.data(), dt, aLog.data(), DT_F32, dtBias.data(), DT_F32, d.data(), DT_F32,
                 states.data(), stDt, slots.data(), y.data(), dt, s.heads, s.headDim, s.groups, s.state, dtMin, dtMax,
                 splits);
        });
    } else {
        // as CudaStateSpace.ssdScan: the piece table, then (when a segment may span pieces) the pieces' own states
        // and their chaining, then the scan of every piece
        const int tiles = (s.headDim + kSsdChannels - 1) / kSsdChannels;
        const int nmax = s.state <= 64 ? 64 : s.state <= 128 ? 128 : 256;  // as CudaStateSpace picks it
        const int cap = (tokens + kSsdPieceTokens - 1) / kSsdPieceTokens + segs;
        const int inners = tokens > 0 ? (tokens - 1) / kSsdPieceTokens : 0, multis = tokens / (kSsdPieceTokens + 1);
        std::vector<int> table(4 + 8 * cap, -7);
        std::vector<float> work((size_t)(inners + multis) * stateSize, NAN), decays((size_t)(inners + multis) * s.heads);
        launch(1, 32, [&] { mamba_ssd_pieces(starts.data(), segs, cap, table.data()); });
        if (inners > 0) {
            const auto pieceState = s.state <= 64 ? mamba_ssd_piece_state_n64
                                  : s.state <= 128 ? mamba_ssd_piece_state_n128 : mamba_ssd_piece_state_n256;
            launch(inners * s.heads * tiles, ssd_threads(nmax), [&] {
                pieceState(xbc.data(), dt, proj.data(), dt, aLog.data(), DT_F32, dtBias.data(), DT_F32, table.data(),
                           cap, work.data(), decays.data(), s.heads, s.headDim, s.groups, s.state, dtMin, dtMax);
            });
            launch(3, 256, [&] {
                mamba_ssd_pass(states.data(), stDt, slots.data(), table.data(), cap, work.data(), decays.data(),
                               s.heads, s.headDim, s.state);
            });
        }
        const auto scan = s.state <= 64 ? mamba_ssd_scan_n64 : s.state <= 128 ? mamba_ssd_scan_n128 : mamba_ssd_scan_n256;
        launch(cap * s.heads * tiles, ssd_threads(nmax), [&] {
            scan(xbc.data(), dt, proj.data(), dt, aLog.data(), DT_F32, dtBias.data(), DT_F32, d.data(), DT_F32,
                 states.data(), stDt, slots.data(), starts.data(), table.data(), cap, work.data(), y.data(), dt,
                 s.heads, s.headDim, s.groups, s.state, dtMin, dtMax);
        });
    }
    int wrong = 0;
    double worst = 0;
    std::vector<bool> named(slotCount, false);
    for (int i = 0; i < segs; i++) {
        named[slots[i]] = true;
        for (int h = 0; h < s.heads; h++) {
            const int g = h / (s.heads / s.groups);
            const size_t base = slots[i] * stateSize + (size_t)h * s.headDim * s.state;
            std::vector<double> st(s.headDim * s.state), mag(s.headDim * s.state);
            for (size_t e = 0; e < st.size(); e++) mag[e] = std::fabs(st[e] = before.at(base + e));
            const double a = -std::exp((double)aLog.at(h));
            for (int t = starts[i]; t < starts[i + 1]; t++) {
                const double step = std::min(std::max(softplus(proj.at((size_t)t * s.width() + inner + conv + h)
                                                               + dtBias.at(h)), (double)dtMin), (double)dtMax);
                const double decay = std::exp(step * a);
                for (int p = 0; p < s.headDim; p++) {
                    const double x = xbc.at((size_t)t * conv + h * s.headDim + p);
                    double acc = 0, accMag = 0;
                    for (int n = 0; n < s.state; n++) {
                        const size_t e = (size_t)p * s.state + n;
                        const double bn = xbc.at((size_t)t * conv + inner + g * s.state + n);
                        const double cn = xbc.at((size_t)t * conv + inner + s.groups * s.state + g * s.state + n);
                        st[e] = st[e] * decay + step * bn * x;
                        mag[e] = mag[e] * decay + std::fabs(step * bn * x);
                        acc += st[e] * cn;
                        accMag += mag[e] * std::fabs(cn);
                    }
                    const double want = acc + d.at(h) * x;
                    const double got = y.at((size_t)t * inner + h * s.headDim + p);
                    worst = std::max(worst, std::fabs(got - want));
                    if (!close(got, want, 4 * (accMag + std::fabs(d.at(h) * x)), dt)) wrong++;
                }
            }
            for (size_t e = 0; e < st.size(); e++) {
                const double got = states.at(base + e);
                worst = std::max(worst, std::fabs(got - st[e]));
                if (!close(got, st[e], 4 * mag[e], stDt)) wrong++;
            }
        }
    }
    for (int sl = 0; sl < slotCount; sl++) {
        if (named[sl]) continue;
        for (size_t e = 0; e < stateSize; e++) {
            if (states.at(sl * stateSize + e) != before.at(sl * stateSize + e)) wrong++;
        }
    }
    report(name, wrong, worst);
}

static void norm_check(const char* name, int dt, int rows, int inner, int groups, int gateWidth) {
    Buffer y(dt, (size_t)rows * inner, 1.f), gate(dt, (size_t)rows * gateWidth, 1.f), w(dt, inner, 1.f);
    Buffer out(dt, (size_t)rows * inner, 1.f);
    const float eps = 1e-6f;
    launch(rows * groups, kNormThreads, [&] {
        mamba_gated_rms_norm(y.data(), dt, gate.data(), dt, w.data(), dt, out.data(), dt, inner, gateWidth, groups,
                             eps);
    });
    int wrong = 0;
    double worst = 0;
    const int size = inner / groups;
    for (int r = 0; r < rows; r++) {
        for (int g = 0; g < groups; g++) {
            std::vector<double> v(size);
            double ss = 0;
            for (int i = 0; i < size; i++) {
                v[i] = y.at((size_t)r * inner + g * size + i) * silu(gate.at((size_t)r * gateWidth + g * size + i));
                ss += v[i] * v[i];
            }
            const double inv = 1 / std::sqrt(ss / size + eps);
            for (int i = 0; i < size; i++) {
                const double want = v[i] * inv * w.at(g * size + i);
                const double got = out.at((size_t)r * inner + g * size + i);
                worst = std::max(worst, std::fabs(got - want));
                if (!close(got, want, std::fabs(want) * 4, dt)) wrong++;
            }
        }
    }
    report(name, wrong, worst);
}

int main() {
    rng.seed(7);
    const float inf = INFINITY;
    const Shape small{4, 8, 2, 16, 4};
    conv_check("conv fp32 prefill segments", DT_F32, small, {5, 1, 0, 37, 2}, {3, 1, 5, 2, 4}, 7);
    conv_check("conv bf16 decode rows", DT_BF16, small, {1, 1, 1}, {2, 6, 1}, 7);
    conv_check("conv width 2", DT_F32, Shape{2, 4, 1, 8, 2}, {3, 4}, {1, 2}, 3);
    conv_check("conv, one run a segment: rows of 0 to 2 tokens", DT_F32, small, {1, 0, 2}, {3, 1, 5}, 7);
    conv_check("conv, 300 channels in 8 runs", DT_BF16, Shape{4, 32, 2, 22, 4}, {70, 3}, {2, 0}, 3);
    scan_check("scan fp32, within and across chunks", DT_F32, small, {5, 16, 37, 1}, {3, 1, 4, 6}, 7, false, inf);
    scan_check("scan bf16 tensors, fp32 state", DT_BF16, small, {17, 3}, {2, 5}, 7, false, inf);
    scan_check("scan with a step size clamp", DT_F32, Shape{6, 4, 3, 8, 4}, {20}, {1}, 2, false, 0.3f);
    scan_check("scan, one group, Bamba-9B head and state", DT_F32, Shape{2, 64, 1, 128, 4}, {19}, {1}, 3, false, inf);
    scan_check("scan, Bamba-9B head and state (one channel tile), chunks of 32", DT_F32, Shape{2, 64, 1, 128, 4},
               {70, 33}, {2, 0}, 3, false, inf);
    scan_check("scan, heads of 80 (a second channel tile, mostly empty)", DT_F32, Shape{2, 80, 1, 64, 4}, {40, 2},
               {1, 2}, 3, false, inf);
    scan_check("scan, heads of 12 and a state of 20 (staged a value at a time)", DT_BF16, Shape{2, 12, 1, 20, 4},
               {45, 7}, {1, 0}, 2, false, inf);
    scan_check("scan, a state of 256 (chunks of 16)", DT_BF16, Shape{2, 40, 2, 256, 4}, {40}, {1}, 2, false, inf);
    scan_check("scan, segments of one to four pieces beside decode rows", DT_F32, Shape{2, 16, 1, 128, 4},
               {600, 1, 257, 256, 0, 1, 1000}, {3, 0, 5, 1, 2, 6, 4}, 7, false, inf);
    scan_check("scan, pieces of a bf16 prompt with two groups and a clamp", DT_BF16, Shape{4, 8, 2, 64, 4}, {700, 3},
               {1, 0}, 2, false, 0.4f);
    scan_check("step, Bamba-9B head and state", DT_F32, Shape{4, 64, 1, 128, 4}, {1, 1, 1}, {2, 0, 3}, 4, true, inf);
    scan_check("step fp32 rows", DT_F32, small, {1, 1, 1, 1}, {4, 2, 6, 1}, 7, true, inf);
    scan_check("step, a state of 256 (every lane's 8 values)", DT_BF16, Shape{2, 8, 2, 256, 4}, {1, 1}, {1, 0}, 2, true,
               inf);
    scan_check("step, a state of 48 (lanes past it idle on the second value)", DT_F32, Shape{2, 8, 1, 48, 4}, {1, 1},
               {0, 1}, 2, true, inf);
    scan_check("step bf16 rows, clamp", DT_BF16, Shape{6, 4, 3, 8, 4}, {1, 1}, {2, 1}, 3, true, 0.2f);
    scan_check("step, heads of 70 (a second pass of channels, warps past the head idle)", DT_F32,
               Shape{2, 70, 2, 128, 4}, {1, 1, 1}, {1, 3, 0}, 4, true, inf);
    scan_check("step, heads of 36 at a state of 200 (two passes of 32 channels, lanes past the state idle)", DT_BF16,
               Shape{2, 36, 1, 200, 4}, {1, 1}, {0, 2}, 3, true, inf);
    scan_check("step, heads of 5 (warps past the head return)", DT_F32, Shape{3, 5, 1, 64, 4}, {1, 1}, {1, 0}, 2, true,
               inf);
    scan_check("step, bf16 states", DT_BF16, Shape{2, 64, 1, 128, 4}, {1, 1}, {2, 0}, 3, true, inf, DT_BF16);
    scan_check("step, one row, heads split in 8 (a channel a warp)", DT_F32, Shape{3, 64, 1, 128, 4}, {1}, {1}, 2,
               true, inf, DT_F32, 8);
    scan_check("step, heads of 70 split in 3 (shares of 24, 24 and 22)", DT_BF16, Shape{2, 70, 2, 128, 4}, {1, 1},
               {1, 0}, 3, true, inf, DT_F32, 3);
    norm_check("gated norm fp32, one group", DT_F32, 3, 128, 1, 328);
    norm_check("gated norm fp32, two groups", DT_F32, 2, 128, 2, 328);
    norm_check("gated norm bf16, eight groups", DT_BF16, 3, 512, 8, 512);
    std::printf(fails ? "mamba2_checks: %d emulated checks failed\n" : "mamba2_checks: all passed\n", fails);
    return fails != 0;
}
