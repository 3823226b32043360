// Host emulation checks of the mixture-of-experts kernels (moe.cu), launched as CudaOps.moeRoute, moeExperts and moeLocalIds launch
// them, on the CPU under cuda_host_shim.h and warp_mma_shim.h. The router must choose what a plain loop over the same logits chooses
// (softmax and sigmoid scores, top k of 2 to 8, normalised or not, DeepSeek-V2's group limit, a routed scaling
// factor), with weights within fp32 rounding. The experts (sort by expert, grouped gate/up with SiLU·mul, grouped down
// with the routing weights, combine) must match a double loop over the same stored inputs within fp32 summation error
// plus, for bf16, the roundings of gate, up, the activation and the output; a row with an expert id outside the stack
// must come out NaN. Each of CudaMoe's four ways through the products is checked so: the CUDA-core tiles (fp32 and bf16),
// the tensor-core decode tiles of 8 and 16 assignments (skinny.cuh's walk; bf16, widths multiples of 64), the grouped
// tensor-core GEMM over tiles of 64 and 128 and its warpgroup form (wgmma.cuh; partial tiles, an expert of more than
// a tile and one of none, Qwen3-30B-A3B's and DeepSeek-V2-Lite's widths), and the
// cuBLAS way's gather (runs back to back, or equal slots) and combine around the products, which a host loop stands in
// for here. Shapes: one
// row (decode), rows whose experts fill several tiles, widths that are not multiples of the tiles. It checks indexing and arithmetic where no GPU is at hand; it says nothing about speed.
// Run: ./run.sh moe_checks
#define MSTAR_HOST_EMULATION
#include "warp_mma_shim.h"
#include "wgmma_shim.h"
#include <algorithm>
using std::max;
using std::min;  // the device min of ints
#include <vector_functions.h>
#include "common.cuh"
#include "moe.cu"
#include "random_buffer.h"
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

using namespace mstar;

static int fails = 0;

struct Routing {
    bool sigmoid;
    int topK;
    bool normalize;
    int groups, topkGroups;
    float scaling;
};

// The router as MoeRouting states it, one row at a time, in fp32 as CpuMoeRouter computes it.
static void route_reference(const std::vector<float>& logits, int rows, int experts, const Routing& r,
                            std::vector<int>& ids, std::vector<float>& weights) {
    for (int row = 0; row < rows; row++) {
        std::vector<float> s(logits.begin() + (size_t)row * experts, logits.begin() + (size_t)(row + 1) * experts);
        if (r.sigmoid) {
            for (float& v : s) v = 1.f / (1.f + std::exp(-v));
        } else {
            const float mx = *std::max_element(s.begin(), s.end());
            float sum = 0;
            for (float& v : s) sum += (v = std::exp(v - mx));
            for (float& v : s) v /= sum;
        }
        std::vector<bool> open(experts, true);
        if (r.groups > 1) {
            const int size = experts / r.groups;
            std::vector<float> best(r.groups, -INFINITY);
            for (int e = 0; e < experts; e++) best[e / size] = std::max(best[e / size], s[e]);
            std::vector<bool> chosen(r.groups, false);
            for (int p = 0; p < r.topkGroups; p++) {
                int at = -1;
                for (int g = 0; g < r.groups; g++)
                    if (!chosen[g] && (at < 0 || best[g] > best[at])) at = g;
                chosen[at] = true;
            }
            for (int e = 0; e < experts; e++) open[e] = chosen[e / size];
        }
        float total = 0;
        std::vector<float> w(r.topK);
        for (int j = 0; j < r.topK; j++) {
            int at = -1;
            for (int e = 0; e < experts; e++)
                if (open[e] && (at < 0 || s[e] > s[at])) at = e;
            open[at] = false;
            ids[(size_t)row * r.topK + j] = at;
            total += (w[j] = s[at]);
        }
        for (int j = 0; j < r.topK; j++)
            weights[(size_t)row * r.topK + j] = (r.normalize ? w[j] / total : w[j]) * r.scaling;
    }
}

static void check_route(const char* name, int rows, int experts, Routing r) {
    std::vector<float> logits((size_t)rows * experts);
    for (float& v : logits) v = rnd(2.f);
    std::vector<int> ids((size_t)rows * r.topK, -7), wantIds(ids.size());
    std::vector<float> weights(ids.size(), -1.f), wantWeights(ids.size());
    launch(rows, 32, [&] {
        moe_route(logits.data(), experts, r.sigmoid, r.topK, r.normalize, r.groups, r.topkGroups, r.scaling,
                  ids.data(), weights.data());
    });
    route_reference(logits, rows, experts, r, wantIds, wantWeights);
    int wrong = 0;
    for (size_t i = 0; i < ids.size(); i++) {
        if (ids[i] != wantIds[i] || !(std::fabs(weights[i] - wantWeights[i]) <= 1e-5f * std::fabs(wantWeights[i])))
            wrong++;
    }
    if (wrong) {
        std::printf("FAIL route %s: %d of %zu choices wrong\n", name, wrong, ids.size());
        fails++;
    }
}

// CudaMoe's ways through the expert products.
enum Way { CUDA_CORES, SKINNY_M1, SKINNY_M2, GROUPED, GROUPED_LARGE, WARPGROUP, GATHER, GATHER_SLOTS };

static double round_dt(int dt, double v) { return dt == DT_BF16 ? (double)__bfloat162float(__float2bfloat16_rn((float)v)) : (float)v; }

// As CudaMoe.experts: the sort in one block of 1024, the two tiled products over the largest possible number of
// tiles (the empty ones exit), the combine over a few blocks of 256 (grid-stride). The cuBLAS way gathers, runs each
// expert's products on its run of sorted rows (here a float loop rounded as cuBLAS into bf16 and silu_mul round) and
// combines from the sorted rows.
static void moe_experts(Buffer& x, Buffer& gateUp, Buffer& down, const std::vector<int>& ids,
                        const std::vector<float>& weights, Buffer& out, int rows, int topK, int experts, int hidden,
                        int inter, Way way = CUDA_CORES) {
    const int assignments = rows * topK;
    const int tileRows = way == SKINNY_M1        ? 8
                         : way == GROUPED       ? kMoeGroupRows
                         : way == GROUPED_LARGE ? kMoeGroupLargeRows
                         : way == WARPGROUP     ? kMoeWgRows
                                                : kMoeTileRows;
    const int maxTiles = std::min(assignments, (assignments + tileRows - 1) / tileRows + std::min(experts, assignments));
    std::vector<int> sorted(assignments, -1), expertStart(experts + 1, -1), tileStart(maxTiles, -1),
        tileExpert(maxTiles, -1), tiles(2, -1);
    Buffer h(out.dt, (size_t)assignments * inter, 0.f);
    std::vector<float> y((size_t)assignments * hidden, 12345.f);
    launch(1, kMoeSortThreads, [&] {
        moe_sort(ids.data(), assignments, experts, tileRows, sorted.data(), expertStart.data(), tileStart.data(),
                 tileExpert.data(), tiles.data());
    });
    using bf16 = __nv_bfloat16;
    const auto* xb = static_cast<const bf16*>(x.data());
    const auto* gub = static_cast<const bf16*>(gateUp.data());
    const auto* db = static_cast<const bf16*>(down.data());
    auto* hb = static_cast<bf16*>(h.data());
    if (way == CUDA_CORES) {
        const int gateUpTiles = (inter + kMoeGateUpCols - 1) / kMoeGateUpCols;
        launch(maxTiles * gateUpTiles, kMoeThreads, [&] {
            moe_gate_up(x.data(), x.dt, gateUp.data(), gateUp.dt, sorted.data(), tileStart.data(), tileExpert.data(),
                        tiles.data(), h.data(), h.dt, topK, hidden, inter);
        });
        const int downTiles = (hidden + kMoeDownCols - 1) / kMoeDownCols;
        launch(maxTiles * downTiles, kMoeThreads, [&] {
            moe_down(h.data(), h.dt, down.data(), down.dt, sorted.data(), tileStart.data(), tileExpert.data(),
                     tiles.data(), weights.data(), y.data(), hidden, inter);
        });
    } else if (way == SKINNY_M1 || way == SKINNY_M2) {
        const bool m1 = way == SKINNY_M1;
        launch(maxTiles * ((inter + 7) / 8), 256, [&] {
            (m1 ? moe_skinny_gate_up_m1 : moe_skinny_gate_up_m2)(xb, gub, sorted.data(), tileStart.data(),
                                                                 tileExpert.data(), tiles.data(), hb, topK, hidden,
                                                                 inter);
        });
        launch(maxTiles * ((hidden + 15) / 16), 256, [&] {
            (m1 ? moe_skinny_down_m1 : moe_skinny_down_m2)(hb, db, sorted.data(), tileStart.data(), tileExpert.data(),
                                                           tiles.data(), weights.data(), y.data(), hidden, inter);
        });
    } else if (way == GROUPED) {
        launch(maxTiles * ((inter + 63) / 64), kMoeGroupThreads, [&] {
            moe_grouped_gate_up(xb, gub, sorted.data(), tileStart.data(), tileExpert.data(), tiles.data(), hb, topK,
                                hidden, inter);
        });
        launch(maxTiles * ((hidden + 127) / 128), kMoeGroupThreads, [&] {
            moe_grouped_down(hb, db, sorted.data(), tileStart.data(), tileExpert.data(), tiles.data(), weights.data(),
                             y.data(), hidden, inter);
        });
    } else if (way == GROUPED_LARGE) {
        launch(maxTiles * ((inter + 63) / 64), kMoeGroupLargeThreads, [&] {
            moe_grouped_gate_up_m128(xb, gub, sorted.data(), tileStart.data(), tileExpert.data(), tiles.data(), hb,
                                     topK, hidden, inter);
        });
        launch(maxTiles * ((hidden + 127) / 128), kMoeGroupLargeThreads, [&] {
            moe_grouped_down_m128(hb, db, sorted.data(), tileStart.data(), tileExpert.data(), tiles.data(),
                                  weights.data(), y.data(), hidden, inter);
        });
    } else if (way == WARPGROUP) {
        launch(maxTiles * ((inter + kMoeWgCols / 2 - 1) / (kMoeWgCols / 2)), kMoeWgThreads, [&] {
            moe_wgmma_gate_up(xb, gub, sorted.data(), tileStart.data(), tileExpert.data(), tiles.data(), hb, topK,
                              hidden, inter);
        });
        launch(maxTiles * ((hidden + kMoeWgCols - 1) / kMoeWgCols), kMoeWgThreads, [&] {
            moe_wgmma_down(hb, db, sorted.data(), tileStart.data(), tileExpert.data(), tiles.data(), weights.data(),
                           y.data(), hidden, inter);
        });
    }
    if (way != GATHER && way != GATHER_SLOTS) {
        launch(3, 256, [&] {
            moe_combine(y.data(), ids.data(), experts, out.data(), out.dt, rows, hidden, topK);
        });
        return;
    }
    // equal slots of the largest run's rows for each expert, or the runs back to back in sorted order
    int slotRows = 0;
    for (int e = 0; e < experts && way == GATHER_SLOTS; e++) slotRows = std::max(slotRows, expertStart[e + 1] - expertStart[e]);
    const int slots = way == GATHER_SLOTS ? experts * slotRows : assignments;
    Buffer xs(x.dt, (size_t)slots * hidden, 0.f);
    std::vector<int> pos(assignments, -1);
    y.assign((size_t)slots * hidden, 12345.f);
    launch(5, 256, [&] {
        moe_gather(x.data(), x.dt, ids.data(), sorted.data(), expertStart.data(), tiles.data(), xs.data(), pos.data(),
                   assignments, hidden, topK, slotRows);
    });
    // each expert's run of rows through its gate/up and down products
    for (int e = 0; e < experts; e++) {
        const int first = way == GATHER_SLOTS ? e * slotRows : expertStart[e];
        for (int p = first; p < first + expertStart[e + 1] - expertStart[e]; p++) {
            std::vector<float> hv(inter);
            for (int c = 0; c < inter; c++) {
                float g = 0, u = 0;
                for (int i = 0; i < hidden; i++) {
                    g += xs.at((size_t)p * hidden + i) * gateUp.at(((size_t)e * 2 * inter + c) * hidden + i);
                    u += xs.at((size_t)p * hidden + i) * gateUp.at(((size_t)e * 2 * inter + inter + c) * hidden + i);
                }
                hv[c] = (float)round_dt(h.dt, silu_times((float)round_dt(h.dt, g), (float)round_dt(h.dt, u)));
            }
            for (int o = 0; o < hidden; o++) {
                float s = 0;
                for (int c = 0; c < inter; c++) s += hv[c] * down.at(((size_t)e * hidden + o) * inter + c);
                y[(size_t)p * hidden + o] = s;
            }
        }
    }
    launch(3, 256, [&] {
        moe_combine_sorted(y.data(), pos.data(), ids.data(), weights.data(), experts, out.data(), out.dt, rows, hidden,
                           topK);
    });
}

// skewed: every row's first choice is expert 0 and the others are drawn from experts 1 .. experts - 2, so expert 0
// gets a row per row and the last expert none.
static void check_experts(const char* name, int dt, int rows, int topK, int experts, int hidden, int inter,
                          int badRow = -1, Way way = CUDA_CORES, bool skewed = false) {
    Buffer x(dt, (size_t)rows * hidden, 1.f), gateUp(dt, (size_t)experts * 2 * inter * hidden, 0.15f),
        down(dt, (size_t)experts * hidden * inter, 0.15f), out(dt, (size_t)rows * hidden, 0.f);
    std::vector<int> ids((size_t)rows * topK);
    std::vector<float> weights(ids.size());
    for (int r = 0; r < rows; r++) {
        std::vector<int> perm(experts);
        std::iota(perm.begin(), perm.end(), 0);
        if (skewed) {
            std::shuffle(perm.begin() + 1, perm.end() - 1, rng);
        } else {
            std::shuffle(perm.begin(), perm.end(), rng);
        }
        for (int j = 0; j < topK; j++) {
            ids[(size_t)r * topK + j] = perm[j];
            weights[(size_t)r * topK + j] = std::uniform_real_distribution<float>(0.05f, 1.f)(rng);
        }
    }
    if (badRow >= 0) ids[(size_t)badRow * topK + topK - 1] = experts;
    moe_experts(x, gateUp, down, ids, weights, out, rows, topK, experts, hidden, inter, way);
    int wrong = 0;
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        std::vector<double> want(hidden, 0.0), magnitude(hidden, 0.0);
        for (int j = 0; j < topK && r != badRow; j++) {
            const int e = ids[(size_t)r * topK + j];
            const double w = weights[(size_t)r * topK + j];
            std::vector<double> hv(inter);
            for (int c = 0; c < inter; c++) {
                double g = 0, u = 0;
                for (int i = 0; i < hidden; i++) {
                    g += (double)x.at((size_t)r * hidden + i) * gateUp.at(((size_t)e * 2 * inter + c) * hidden + i);
                    u += (double)x.at((size_t)r * hidden + i) * gateUp.at(((size_t)e * 2 * inter + inter + c) * hidden + i);
                }
                g = round_dt(dt, g);
                u = round_dt(dt, u);
                hv[c] = round_dt(dt, g / (1 + std::exp(-g)) * u);
            }
            for (int o = 0; o < hidden; o++) {
                for (int c = 0; c < inter; c++) {
                    const double p = hv[c] * down.at(((size_t)e * hidden + o) * inter + c);
                    want[o] += w * p;
                    magnitude[o] += w * std::fabs(p);
                }
            }
        }
        for (int o = 0; o < hidden; o++) {
            const float got = out.at((size_t)r * hidden + o);
            if (r == badRow) {
                if (!std::isnan(got)) wrong++;
                continue;
            }
            // fp32 sums; for bf16 a gate, up or activation rounding may land one ulp apart, plus the output's rounding
            const double tol = 1e-5 * magnitude[o] + (dt == DT_BF16 ? magnitude[o] / 64 + std::fabs(want[o]) / 128 : 0);
            const double diff = std::fabs(got - want[o]);
            worst = std::max(worst, diff);
            if (!(diff <= tol)) wrong++;
        }
    }
    if (wrong) {
        std::printf("FAIL experts %s: %d outputs wrong (worst |diff| %.3g)\n", name, wrong, worst);
        fails++;
    }
}

// The grouped GEMM's promise (CudaMoe's class comment): a row gets the same bits alone as among many rows routed to
// the same experts, though its place in the tiles differs: the few rows alone through `fewWay`, all of them through
// `manyWay` (the 64-row tiles alone give the 128-row tiles' bits; the warpgroup products their own).
static void check_grouped_bits(int rows, int few, int topK, int experts, int hidden, int inter, Way manyWay = GROUPED,
                               Way fewWay = GROUPED) {
    const int dt = DT_BF16;
    Buffer x(dt, (size_t)rows * hidden, 1.f), gateUp(dt, (size_t)experts * 2 * inter * hidden, 0.15f),
        down(dt, (size_t)experts * hidden * inter, 0.15f), all(dt, (size_t)rows * hidden, 0.f);
    std::vector<int> ids((size_t)rows * topK);
    std::vector<float> weights(ids.size());
    for (size_t a = 0; a < ids.size(); a++) {
        ids[a] = std::uniform_int_distribution<int>(0, experts - 1)(rng);
        weights[a] = std::uniform_real_distribution<float>(0.05f, 1.f)(rng);
    }
    moe_experts(x, gateUp, down, ids, weights, all, rows, topK, experts, hidden, inter, manyWay);
    // the last `few` rows alone: first in their tiles now
    Buffer xFew(dt, (size_t)few * hidden, 0.f), outFew(dt, (size_t)few * hidden, 0.f);
    std::copy_n(x.bytes.begin() + (size_t)(rows - few) * hidden * 2, xFew.bytes.size(), xFew.bytes.begin());
    const std::vector<int> idsFew(ids.end() - (size_t)few * topK, ids.end());
    const std::vector<float> weightsFew(weights.end() - (size_t)few * topK, weights.end());
    moe_experts(xFew, gateUp, down, idsFew, weightsFew, outFew, few, topK, experts, hidden, inter, fewWay);
    if (!std::equal(outFew.bytes.begin(), outFew.bytes.end(), all.bytes.begin() + (size_t)(rows - few) * hidden * 2)) {
        std::printf("FAIL grouped bits: %d rows alone differ from the same rows among %d\n", few, rows);
        fails++;
    }
}

// Expert parallelism: each of two devices holds half the experts, renumbers the routed ids (moe_local_ids: -1 for the
// other device's) and runs the experts of its half; the two outputs added give the output of all experts on one.
static void check_split(const char* name, int rows, int topK, int experts, int hidden, int inter) {
    const int dt = DT_F32;
    Buffer x(dt, (size_t)rows * hidden, 1.f), gateUp(dt, (size_t)experts * 2 * inter * hidden, 0.15f),
        down(dt, (size_t)experts * hidden * inter, 0.15f), whole(dt, (size_t)rows * hidden, 0.f);
    std::vector<int> ids((size_t)rows * topK);
    std::vector<float> weights(ids.size());
    for (int r = 0; r < rows; r++) {
        std::vector<int> perm(experts);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int j = 0; j < topK; j++) {
            ids[(size_t)r * topK + j] = perm[j];
            weights[(size_t)r * topK + j] = std::uniform_real_distribution<float>(0.05f, 1.f)(rng);
        }
    }
    moe_experts(x, gateUp, down, ids, weights, whole, rows, topK, experts, hidden, inter);
    const int half = experts / 2;
    std::vector<double> sum((size_t)rows * hidden, 0.0);
    for (int device = 0; device < 2; device++) {
        std::vector<int> local(ids.size(), 99);
        launch(2, 256, [&] {
            moe_local_ids(ids.data(), device * half, half, local.data(), (long long)ids.size());
        });
        for (size_t a = 0; a < ids.size(); a++) {
            const int want = ids[a] >= device * half && ids[a] < (device + 1) * half ? ids[a] - device * half : -1;
            if (local[a] != want) {
                std::printf("FAIL split %s: device %d id %d renumbered %d, want %d\n", name, device, ids[a], local[a],
                            want);
                fails++;
                return;
            }
        }
        Buffer myGateUp(dt, (size_t)half * 2 * inter * hidden, 0.f), myDown(dt, (size_t)half * hidden * inter, 0.f),
            out(dt, (size_t)rows * hidden, 0.f);
        std::copy_n(gateUp.bytes.begin() + (size_t)device * half * 2 * inter * hidden * 4, myGateUp.bytes.size(),
                    myGateUp.bytes.begin());
        std::copy_n(down.bytes.begin() + (size_t)device * half * hidden * inter * 4, myDown.bytes.size(),
                    myDown.bytes.begin());
        moe_experts(x, myGateUp, myDown, local, weights, out, rows, topK, half, hidden, inter);
        for (size_t i = 0; i < sum.size(); i++) sum[i] += out.at(i);
    }
    int wrong = 0;
    for (size_t i = 0; i < sum.size(); i++) {
        if (!(std::fabs(sum[i] - whole.at(i)) <= 1e-5 * (1 + std::fabs(whole.at(i))))) wrong++;
    }
    if (wrong) {
        std::printf("FAIL split %s: %d outputs differ from one device's\n", name, wrong);
        fails++;
    }
}

int main() {
    rng.seed(7);
    check_route("softmax top-2 of 8 (OLMoE-like)", 5, 8, {false, 2, false, 1, 1, 1.f});
    check_route("softmax top-8 of 128, normalised (Qwen3-MoE)", 7, 128, {false, 8, true, 1, 1, 1.f});
    check_route("group-limited top-6 of 160 in 8 groups, 3 kept, scaled (DeepSeek-V2)", 6, 160,
                {false, 6, false, 8, 3, 16.f});
    check_route("sigmoid top-4 of 64 in 4 groups, 2 kept, normalised and scaled", 4, 64, {true, 4, true, 4, 2, 2.5f});
    check_route("top-40 of 64: more picks than a warp's lanes", 2, 64, {false, 40, true, 1, 1, 1.f});
    check_experts("fp32 decode row, 8 of 16 experts", DT_F32, 1, 8, 16, 96, 80);
    check_experts("fp32 rows filling several tiles of 4 experts", DT_F32, 40, 2, 4, 72, 40);
    check_experts("bf16 rows of 32 experts", DT_BF16, 9, 4, 32, 128, 64);
    check_experts("bf16 odd widths", DT_BF16, 20, 3, 6, 65, 33);
    check_experts("an expert id outside the stack", DT_F32, 4, 2, 5, 64, 32, 2);
    check_split("8 experts over 2 devices, top 2", 12, 2, 8, 64, 32);
    check_split("16 experts over 2 devices, a decode row of top 8", 1, 8, 16, 72, 40);
    check_experts("tensor-core tiles of 8: a decode row, 8 of 16 experts", DT_BF16, 1, 8, 16, 128, 64, -1, SKINNY_M1);
    check_experts("tensor-core tiles of 8: experts of more than a tile", DT_BF16, 12, 3, 4, 64, 128, -1, SKINNY_M1);
    check_experts("tensor-core tiles of 16: partial tiles of 3 experts", DT_BF16, 21, 2, 3, 64, 64, -1, SKINNY_M2);
    check_experts("tensor-core tiles of 16, an expert id outside the stack", DT_BF16, 6, 2, 5, 128, 64, 3, SKINNY_M2);
    check_experts("grouped GEMM: partial tiles of 3 experts, output columns past a 128-column block", DT_BF16, 70,
                  2, 3, 192, 128, -1, GROUPED);
    check_experts("grouped GEMM, skewed: an expert of more than a tile, one of none", DT_BF16, 90, 2, 5, 128, 64, -1,
                  GROUPED, true);
    check_grouped_bits(150, 3, 2, 3, 128, 64);
    check_experts("128-row grouped GEMM: partial tiles of 3 experts, output columns past a 128-column block",
                  DT_BF16, 140, 2, 3, 192, 128, -1, GROUPED_LARGE);
    check_experts("128-row grouped GEMM, skewed: an expert of more than a tile, one of none", DT_BF16, 150, 2, 5,
                  128, 64, -1, GROUPED_LARGE, true);
    check_experts("128-row grouped GEMM, an expert id outside the stack", DT_BF16, 33, 2, 4, 64, 64, 5,
                  GROUPED_LARGE);
    check_grouped_bits(300, 3, 2, 3, 128, 64, GROUPED_LARGE);
    check_experts("grouped GEMM, an expert id outside the stack", DT_BF16, 33, 2, 4, 64, 64, 5, GROUPED);
    // the models' widths with few tiles: the emulation runs a block at a time
    check_experts("grouped GEMM at Qwen3-30B-A3B's widths 2048/768: 70 rows of one expert, none of the other",
                  DT_BF16, 70, 1, 2, 2048, 768, -1, GROUPED, true);
    check_experts("grouped GEMM at DeepSeek-V2-Lite's widths 2048/1408: 6 rows", DT_BF16, 6, 1, 1, 2048, 1408, -1,
                  GROUPED);
    check_experts("128-row grouped GEMM at Qwen3-30B-A3B's widths 2048/768: 140 rows of one expert", DT_BF16, 140,
                  1, 2, 2048, 768, -1, GROUPED_LARGE, true);
    check_experts("warpgroup GEMM: partial tiles of 3 experts, output columns past a 256-column block", DT_BF16, 140,
                  2, 3, 320, 192, -1, WARPGROUP);
    check_experts("warpgroup GEMM, skewed: an expert of more than a tile, one of none", DT_BF16, 150, 2, 5, 128, 64,
                  -1, WARPGROUP, true);
    check_experts("warpgroup GEMM, tiles of at most 64 rows (the second warpgroup idle)", DT_BF16, 40, 2, 3, 64, 128,
                  -1, WARPGROUP);
    check_experts("warpgroup GEMM, an expert id outside the stack", DT_BF16, 33, 2, 4, 64, 64, 5, WARPGROUP);
    check_grouped_bits(300, 3, 2, 3, 128, 64, WARPGROUP, WARPGROUP);
    check_experts("warpgroup GEMM at Qwen3-30B-A3B's widths 2048/768: 140 rows of one expert", DT_BF16, 140, 1, 2,
                  2048, 768, -1, WARPGROUP, true);
    check_experts("warpgroup GEMM at DeepSeek-V2-Lite's widths 2048/1408: 70 rows", DT_BF16, 70, 1, 1, 2048, 1408, -1,
                  WARPGROUP);
    check_experts("cuBLAS way: gather and sorted combine", DT_BF16, 10, 3, 6, 72, 40, -1, GATHER);
    check_experts("cuBLAS way, an expert id outside the stack", DT_BF16, 5, 2, 4, 64, 32, 1, GATHER);
    check_experts("cuBLAS way in equal slots: gather and combine", DT_BF16, 10, 3, 6, 72, 40, -1, GATHER_SLOTS);
    check_experts("cuBLAS way in equal slots, an expert id outside the stack", DT_BF16, 5, 2, 4, 64, 32, 1,
                  GATHER_SLOTS);
    std::printf(fails ? "moe_checks: %d emulated checks failed\n" : "moe_checks: all passed\n", fails);
    return fails != 0;
}
