// Times the bf16 prefill attention kernels alone, without Java, so that their variants can be compared in one GPU
// call: the mma.sync kernel (attention_prefill_mma.cu, attention_ragged.cu) and the warpgroup one
// (attention_prefill_wgmma.cu) with the key tile and stage count it ships with and others, and with each tile's value
// product issued beside the next tile's scores. Geometries: Qwen3-30B-A3B's
// attention (32 query / 4 KV heads of 128, paged, 16-token pages in random order) on one 2048-token causal prompt,
// Llama-3-8B's (32 / 8) on one of 16384, and DeepSeek-V2-Lite's up-projected prefill (16 heads of 192, ragged) on
// 2048. Each variant's output is checked against the mma.sync kernel's (max |diff| / max |ref| over 1e-2 fails), and
// each time is the median of 20 event-timed launches; TFLOP/s count the visible score and value products. Build and
// run on the GPU machine (a minute):
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I kernels/src/main/cuda \
//        -o /tmp/pab tools/cuda/prefill_attention_bench.cu && /tmp/pab
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention_prefill_mma.cu"
#include "attention_ragged.cu"
#include "attention_prefill_wgmma.cu"

#include "bench_check.cuh"

namespace {

using bf16 = __nv_bfloat16;

// The warpgroup body with other key tiles and stage counts than the shipped kernels'.
template <int D, int KEYS, int STAGES, bool OVERLAP = false>
__global__ void __launch_bounds__(256, 1) paged_variant(const bf16* q, const void* pool, const int* qoIndptr,
                                                        const int* kvIndptr, const int* kvIndices,
                                                        const int* lastPageLen, int numPages, int pageSize,
                                                        int qoHeads, int kvHeads, float smScale, bf16* out) {
    prefill_wgmma_body<D, WgmmaShape<D, KEYS, STAGES, OVERLAP>>(
        q, PagedKeys{PagedKv{pool, kvIndptr, kvIndices, lastPageLen, 0, numPages, pageSize, kvHeads}},
        Mask{1, -1, 0}, qoIndptr, qoHeads, smScale, out);
}

template <int D, int KEYS, int STAGES, bool OVERLAP = false>
__global__ void __launch_bounds__(256, 1) ragged_variant(const bf16* q, const bf16* k, const bf16* v,
                                                         const int* qIndptr, const int* kvIndptr, int qoHeads,
                                                         int kvHeads, float smScale, bf16* out) {
    prefill_wgmma_body<D, WgmmaShape<D, KEYS, STAGES, OVERLAP>>(q, RaggedKeys{k, v, kvIndptr, kvHeads}, BlockMask{1},
                                                       qIndptr, qoHeads, smScale, out);
}

template <class T>
T* upload(const std::vector<T>& h) {
    T* d;
    CHECK(cudaMalloc(&d, h.size() * sizeof(T)));
    CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

std::vector<bf16> random_bf16(size_t n, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<bf16> v(n);
    for (auto& x : v) x = __float2bfloat16(u(rng));
    return v;
}

// Median ms of 20 launches after 3 warm-ups.
template <class F>
double median_ms(F launch) {
    for (int i = 0; i < 3; ++i) launch();
    CHECK(cudaDeviceSynchronize());
    std::vector<double> ms;
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 20; ++i) {
        CHECK(cudaEventRecord(a));
        launch();
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float t;
        CHECK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    CHECK(cudaGetLastError());
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

double rel_diff(const bf16* dOut, const std::vector<float>& ref) {
    std::vector<bf16> h(ref.size());
    CHECK(cudaMemcpy(h.data(), dOut, h.size() * 2, cudaMemcpyDeviceToHost));
    double mx = 0, diff = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        mx = std::max(mx, (double)std::fabs(ref[i]));
        const double d = std::fabs((double)__bfloat162float(h[i]) - ref[i]);
        diff = std::isnan(d) ? INFINITY : std::max(diff, d);
    }
    return diff / mx;
}

std::vector<float> to_float(const bf16* dOut, size_t n) {
    std::vector<bf16> h(n);
    CHECK(cudaMemcpy(h.data(), dOut, n * 2, cudaMemcpyDeviceToHost));
    std::vector<float> f(n);
    for (size_t i = 0; i < n; ++i) f[i] = __bfloat162float(h[i]);
    return f;
}

int failures = 0;

void row(const char* geometry, const std::string& kernel, double ms, double flops, double diff) {
    const bool ok = diff <= 1e-2;
    failures += !ok;
    std::printf("| %s | %s | %.3f | %.1f | %.1e%s |\n", geometry, kernel.c_str(), ms, flops / (ms * 1e-3) / 1e12, diff,
                ok ? "" : " FAIL");
}

template <class K>
void set_smem(K kernel, int bytes) {
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

// One causal prompt of `tokens` over a paged pool [1 layer, pages, 2, 16, kvHeads, 128].
void paged(const char* geometry, int heads, int kvHeads, int tokens, std::mt19937& rng) {
    constexpr int D = 128, PAGE = 16;
    const int pages = (tokens + PAGE - 1) / PAGE;
    std::vector<int> perm(pages);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const std::vector<int> qo{0, tokens}, kvIndptr{0, pages}, last{tokens - (pages - 1) * PAGE};
    bf16* pool = upload(random_bf16((size_t)pages * 2 * PAGE * kvHeads * D, rng));
    bf16* q = upload(random_bf16((size_t)tokens * heads * D, rng));
    bf16* out;
    CHECK(cudaMalloc(&out, (size_t)tokens * heads * D * 2));
    int *dQo = upload(qo), *dKv = upload(kvIndptr), *dIdx = upload(perm), *dLast = upload(last);
    const float scale = 1.f / std::sqrt((float)D);
    const double flops = 4.0 * heads * D * ((double)tokens * (tokens + 1) / 2);
    const int group = heads / kvHeads;

    using M = MmaPrefillShape<D>;
    set_smem(attn_prefill_mma_bf16_d128, M::SMEM_BYTES);
    const unsigned mmaTiles = (tokens * group + M::ROWS - 1) / M::ROWS;
    auto mma = [&] {
        attn_prefill_mma_bf16_d128<<<dim3(mmaTiles, kvHeads, 1), M::THREADS, M::SMEM_BYTES>>>(
            q, pool, dQo, dKv, dIdx, dLast, 0, pages, PAGE, heads, kvHeads, 1, -1, 0, scale, out);
    };
    mma();
    CHECK(cudaDeviceSynchronize());
    const std::vector<float> ref = to_float(out, (size_t)tokens * heads * D);
    row(geometry, "mma.sync (256 rows, 64 keys, 2 stages)", median_ms(mma), flops, 0.0);

    auto variant = [&](auto kernel, int keys, int stages, const char* name) {
        const int smem = 128 * D * 2 + 2 * stages * keys * D * 2 + 1024;
        set_smem(kernel, smem);
        const unsigned tiles = (tokens * group + 127) / 128;
        auto launch = [&] {
            kernel<<<dim3(tiles, kvHeads, 1), 256, smem>>>(q, pool, dQo, dKv, dIdx, dLast, pages, PAGE, heads, kvHeads,
                                                             scale, out);
        };
        CHECK(cudaMemset(out, 0xff, (size_t)tokens * heads * D * 2));
        launch();
        CHECK(cudaDeviceSynchronize());
        const double diff = rel_diff(out, ref);
        row(geometry, name, median_ms(launch), flops, diff);
    };
    variant(paged_variant<D, 128, 2>, 128, 2, "wgmma 128 keys, 2 stages (shipped)");
    variant(paged_variant<D, 128, 3>, 128, 3, "wgmma 128 keys, 3 stages");
    variant(paged_variant<D, 64, 3>, 64, 3, "wgmma 64 keys, 3 stages");
    variant(paged_variant<D, 64, 4>, 64, 4, "wgmma 64 keys, 4 stages");
    variant(paged_variant<D, 64, 3, true>, 64, 3, "wgmma 64 keys, 3 stages, values beside next scores");
    variant(paged_variant<D, 128, 3, true>, 128, 3, "wgmma 128 keys, 3 stages, values beside next scores");
    for (void* p : {(void*)pool, (void*)q, (void*)out, (void*)dQo, (void*)dKv, (void*)dIdx, (void*)dLast}) cudaFree(p);
}

// One causal span of `tokens` queries and keys, q, k and v [tokens, heads, 192] (DeepSeek-V2's values padded).
void ragged(const char* geometry, int heads, int tokens, std::mt19937& rng) {
    constexpr int D = 192;
    const std::vector<int> indptr{0, tokens};
    const size_t n = (size_t)tokens * heads * D;
    bf16 *q = upload(random_bf16(n, rng)), *k = upload(random_bf16(n, rng)), *v = upload(random_bf16(n, rng));
    bf16* out;
    CHECK(cudaMalloc(&out, n * 2));
    int* dIndptr = upload(indptr);
    const float scale = 1.f / std::sqrt((float)D);
    const double flops = 4.0 * heads * D * ((double)tokens * (tokens + 1) / 2);

    using M = MmaPrefillShape<D>;
    set_smem(attn_ragged_mma_bf16_d192, M::SMEM_BYTES);
    const unsigned mmaTiles = (tokens + M::ROWS - 1) / M::ROWS;
    auto mma = [&] {
        attn_ragged_mma_bf16_d192<<<dim3(mmaTiles, heads, 1), M::THREADS, M::SMEM_BYTES>>>(
            q, k, v, dIndptr, dIndptr, heads, heads, 1, scale, out);
    };
    mma();
    CHECK(cudaDeviceSynchronize());
    const std::vector<float> ref = to_float(out, n);
    row(geometry, "mma.sync (128 rows, 32 keys, 2 stages)", median_ms(mma), flops, 0.0);

    auto variant = [&](auto kernel, int keys, int stages, const char* name) {
        const int smem = 128 * D * 2 + 2 * stages * keys * D * 2 + 1024;
        set_smem(kernel, smem);
        auto launch = [&] {
            kernel<<<dim3((tokens + 127) / 128, heads, 1), 256, smem>>>(q, k, v, dIndptr, dIndptr, heads, heads, scale,
                                                                        out);
        };
        CHECK(cudaMemset(out, 0xff, n * 2));
        launch();
        CHECK(cudaDeviceSynchronize());
        row(geometry, name, median_ms(launch), flops, rel_diff(out, ref));
    };
    variant(ragged_variant<D, 64, 2>, 64, 2, "wgmma 64 keys, 2 stages (shipped)");
    variant(ragged_variant<D, 64, 3>, 64, 3, "wgmma 64 keys, 3 stages");
    variant(ragged_variant<D, 64, 3, true>, 64, 3, "wgmma 64 keys, 3 stages, values beside next scores");
    for (void* p : {(void*)q, (void*)k, (void*)v, (void*)out, (void*)dIndptr}) cudaFree(p);
}

}  // namespace

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("%s\n\n| geometry | kernel | ms | TFLOP/s | max diff / max ref |\n|---|---|---|---|---|\n", prop.name);
    std::mt19937 rng(5);
    paged("Qwen3-30B-A3B 32/4 x d128, 2048 causal", 32, 4, 2048, rng);
    paged("Llama-3-8B 32/8 x d128, 16384 causal", 32, 8, 16384, rng);
    ragged("DeepSeek-V2-Lite 16 x d192, 2048 causal", 16, 2048, rng);
    std::printf("\n%s\n", failures ? "FAILED" : "all outputs agree");
    return failures != 0;
}
