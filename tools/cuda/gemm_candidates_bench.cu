// What choosing a cuBLASLt algorithm by measurement could win over cublasGemmEx's own choice, for the projections
// of Llama-3.1-8B at the row counts a serving load runs (decode steps of 256-1024 rows, prefill steps of 4096-16384
// tokens), without Java, in one GPU call. Each product is row-major x[M, K] · W[N, K]^T in bf16 with fp32
// accumulation, as CudaMatmul runs it. For every shape: cublasGemmEx's time, then each of up to 32 candidates
// Lt's heuristic offers (split-K and its reductions allowed) timed alike; the table gives the default, the fastest
// candidate, its tile and split-K, and both as TFLOP/s. Operands are random bf16 (products of zeros run faster
// than real ones: the tensor cores draw less power), each cell is the median of 15 event-timed launches over four
// weight copies in turn (so the weight comes from memory, not L2), after a warm-up. Also prints the rate of an
// 8192^3 product on random and on zero operands (best single launch and 20 back to back), as the serving bench
// measures its ceiling's matmul rate. Build and run on the GPU machine (about a minute):
//   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -o /tmp/gcb tools/cuda/gemm_candidates_bench.cu \
//        -lcublasLt -lcublas && /tmp/gcb
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "bench_check.cuh"
#define CHECK_BLAS(x)                                                                   \
    do {                                                                                \
        int s = (int)(x);                                                               \
        if (s != 0) {                                                                   \
            std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, s); \
            std::exit(1);                                                               \
        }                                                                               \
    } while (0)

namespace {

constexpr int COPIES = 4;
constexpr int RUNS = 15;
constexpr size_t WORKSPACE = 64ull << 20;

struct Proj {
    const char *name;
    int n, k;
};

// Roughly normal bf16 values from a hash of (seed, index): a sum of four uniforms, filled on the device.
__global__ void fill_random_kernel(__nv_bfloat16 *dst, size_t count, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long z = (i + 1) * 0x9E3779B97F4A7C15ull ^ ((unsigned long long)seed << 32);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float sum = 0;
        for (int j = 0; j < 4; j++) sum += ((z >> (16 * j)) & 0xFFFF) / 65536.f;
        dst[i] = __float2bfloat16((sum - 2.f) * 1.7320508f);
    }
}

void fill_random(__nv_bfloat16 *dst, size_t count, unsigned seed) {
    fill_random_kernel<<<1024, 256>>>(dst, count, seed);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
}

float median_ms(const std::function<void(int)> &launch) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++) launch(i);
    std::vector<float> ms;
    for (int i = 0; i < RUNS; i++) {
        CHECK(cudaEventRecord(a));
        launch(i);
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float t;
        CHECK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    std::sort(ms.begin(), ms.end());
    return ms[RUNS / 2];
}

unsigned algo_attr(const cublasLtMatmulAlgo_t &algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
    unsigned v = 0;
    size_t written = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof v, &written);
    return v;
}

void square_rates(cublasHandle_t blas) {
    const int n = 8192;
    __nv_bfloat16 *a, *b, *c;
    CHECK(cudaMalloc(&a, (size_t)n * n * 2));
    CHECK(cudaMalloc(&b, (size_t)n * n * 2));
    CHECK(cudaMalloc(&c, (size_t)n * n * 2));
    float one = 1, zero = 0;
    auto gemm = [&] {
        CHECK_BLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, b, CUDA_R_16BF, n, a, CUDA_R_16BF, n,
                                &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    double flops = 2.0 * n * n * n;
    for (int random = 0; random < 2; random++) {
        if (random) {
            fill_random(a, (size_t)n * n, 1);
            fill_random(b, (size_t)n * n, 2);
        } else {
            CHECK(cudaMemset(a, 0, (size_t)n * n * 2));
            CHECK(cudaMemset(b, 0, (size_t)n * n * 2));
        }
        cudaEvent_t start, stop;
        CHECK(cudaEventCreate(&start));
        CHECK(cudaEventCreate(&stop));
        gemm();
        float best = 1e30f;
        for (int i = 0; i < 5; i++) {
            CHECK(cudaEventRecord(start));
            gemm();
            CHECK(cudaEventRecord(stop));
            CHECK(cudaEventSynchronize(stop));
            float t;
            CHECK(cudaEventElapsedTime(&t, start, stop));
            best = std::min(best, t);
        }
        CHECK(cudaEventRecord(start));
        for (int i = 0; i < 20; i++) gemm();
        CHECK(cudaEventRecord(stop));
        CHECK(cudaEventSynchronize(stop));
        float run;
        CHECK(cudaEventElapsedTime(&run, start, stop));
        std::printf("8192^3 bf16 on %s operands: best single %.0f TFLOP/s, 20 back to back %.0f TFLOP/s\n",
                    random ? "random" : "zero", flops / best / 1e9, 20 * flops / run / 1e9);
    }
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(c));
}

}  // namespace

int main() {
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    CHECK_BLAS(cublasCreate(&blas));
    CHECK_BLAS(cublasLtCreate(&lt));
    void *workspace;
    CHECK(cudaMalloc(&workspace, WORKSPACE));
    CHECK_BLAS(cublasSetWorkspace(blas, workspace, WORKSPACE));
    square_rates(blas);

    const Proj projs[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336},
                          {"lm_head", 128256, 4096}};
    const int rows[] = {256, 512, 1000, 1024, 4096, 16384};
    int max_rows = 16384;
    size_t max_w = 0;
    for (const Proj &p : projs) max_w = std::max(max_w, (size_t)p.n * p.k);
    __nv_bfloat16 *x, *out;
    CHECK(cudaMalloc(&x, (size_t)max_rows * 14336 * 2));
    CHECK(cudaMalloc(&out, (size_t)max_rows * 128256 * 2));
    fill_random(x, (size_t)max_rows * 14336, 7);
    std::vector<__nv_bfloat16 *> w(COPIES);
    for (int i = 0; i < COPIES; i++) {
        CHECK(cudaMalloc(&w[i], max_w * 2));
        fill_random(w[i], max_w, 11 + i);
    }
    std::printf("\n| proj | M | N | K | cublasGemmEx us | TFLOP/s | best Lt us | TFLOP/s | gain | tile id | split-K | "
                "candidates |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    float one = 1, zero = 0;
    for (const Proj &p : projs) {
        for (int m : rows) {
            if (p.n == 128256 && m > 1024) continue;  // the LM head runs on sampled rows only
            double flops = 2.0 * m * p.n * p.k;
            float base = median_ms([&](int i) {
                CHECK_BLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, p.n, m, p.k, &one, w[i % COPIES], CUDA_R_16BF,
                                        p.k, x, CUDA_R_16BF, p.k, &zero, out, CUDA_R_16BF, p.n, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT));
            });
            cublasLtMatmulDesc_t desc;
            cublasLtMatrixLayout_t la, lb, lc;
            cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
            CHECK_BLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
            CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT));
            CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN));
            CHECK_BLAS(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, p.k, p.n, p.k));
            CHECK_BLAS(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, p.k, m, p.k));
            CHECK_BLAS(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, p.n, m, p.n));
            cublasLtMatmulPreference_t pref;
            CHECK_BLAS(cublasLtMatmulPreferenceCreate(&pref));
            size_t ws = WORKSPACE;
            CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                            sizeof ws));
            cublasLtMatmulHeuristicResult_t results[32];
            int returned = 0;
            CHECK_BLAS(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 32, results, &returned));
            float best = 1e30f;
            int best_i = -1;
            for (int c = 0; c < returned; c++) {
                if (results[c].state != CUBLAS_STATUS_SUCCESS) continue;
                float t = median_ms([&](int i) {
                    CHECK_BLAS(cublasLtMatmul(lt, desc, &one, w[i % COPIES], la, x, lb, &zero, out, lc, out, lc,
                                              &results[c].algo, workspace, WORKSPACE, 0));
                });
                if (t < best) {
                    best = t;
                    best_i = c;
                }
            }
            std::printf("| %s | %d | %d | %d | %.1f | %.0f | %.1f | %.0f | %.2fx | %u | %u | %d (first best: %s) |\n",
                        p.name, m, p.n, p.k, base * 1e3, flops / base / 1e9, best * 1e3, flops / best / 1e9,
                        base / best, algo_attr(results[best_i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                        algo_attr(results[best_i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM), returned,
                        best_i == 0 ? "yes" : "no");
            std::fflush(stdout);
            cublasLtMatmulPreferenceDestroy(pref);
            cublasLtMatrixLayoutDestroy(la);
            cublasLtMatrixLayoutDestroy(lb);
            cublasLtMatrixLayoutDestroy(lc);
            cublasLtMatmulDescDestroy(desc);
        }
    }
    return 0;
}
