// Times the tensor-core prefill attention kernel alone, without Java, so that variants of its tile shape
// can be compared in one GPU call: Llama-3-8B attention geometry (32 query / 8 KV heads of 128, bf16,
// 16-token pages in random order), causal prompts of 512 x 16, 2048 x 4 and 16384 x 1 tokens; median of
// 10 event-timed launches. Build and run on the GPU machine:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -I kernels/src/main/cuda \
//        -o prefill_kernel_bench tools/cuda/prefill_kernel_bench.cu && ./prefill_kernel_bench
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "attention_prefill_mma.cu"

#define CHECK(x)                                                                              \
    do {                                                                                      \
        cudaError_t e = (x);                                                                  \
        if (e != cudaSuccess) {                                                               \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
            std::exit(1);                                                                     \
        }                                                                                     \
    } while (0)

int main() {
    constexpr int H = 32, KVH = 8, D = 128, PAGE = 16;
    using Shape = MmaShape<D>;
    const int cases[][2] = {{512, 16}, {2048, 4}, {16384, 1}};
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.f, 1.f);
    CHECK(cudaFuncSetAttribute(attn_prefill_mma_bf16_d128, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               Shape::SMEM_BYTES));
    std::printf("rows per block %d, keys per tile %d, smem %d bytes\n", Shape::ROWS, Shape::KEYS, Shape::SMEM_BYTES);
    for (auto& c : cases) {
        const int tokens = c[0], batch = c[1], perSeq = tokens / PAGE, pages = perSeq * batch;
        const size_t poolElems = (size_t)pages * 2 * PAGE * KVH * D, qElems = (size_t)batch * tokens * H * D;
        std::vector<__nv_bfloat16> pool(poolElems), q(qElems);
        for (auto& v : pool) v = __float2bfloat16(normal(rng));
        for (auto& v : q) v = __float2bfloat16(normal(rng));
        std::vector<int> indices(pages), qo(batch + 1), kvp(batch + 1), last(batch, PAGE);
        std::iota(indices.begin(), indices.end(), 0);
        std::shuffle(indices.begin(), indices.end(), rng);
        for (int r = 0; r <= batch; ++r) qo[r] = r * tokens, kvp[r] = r * perSeq;
        __nv_bfloat16 *dPool, *dQ, *dOut;
        int *dIdx, *dQo, *dKv, *dLast;
        CHECK(cudaMalloc(&dPool, poolElems * 2));
        CHECK(cudaMalloc(&dQ, qElems * 2));
        CHECK(cudaMalloc(&dOut, qElems * 2));
        CHECK(cudaMalloc(&dIdx, pages * 4));
        CHECK(cudaMalloc(&dQo, (batch + 1) * 4));
        CHECK(cudaMalloc(&dKv, (batch + 1) * 4));
        CHECK(cudaMalloc(&dLast, batch * 4));
        CHECK(cudaMemcpy(dPool, pool.data(), poolElems * 2, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(dQ, q.data(), qElems * 2, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(dIdx, indices.data(), pages * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(dQo, qo.data(), (batch + 1) * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(dKv, kvp.data(), (batch + 1) * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(dLast, last.data(), batch * 4, cudaMemcpyHostToDevice));
        const dim3 grid((tokens * (H / KVH) + Shape::ROWS - 1) / Shape::ROWS, KVH, batch);
        auto launch = [&] {
            attn_prefill_mma_bf16_d128<<<grid, kMmaThreads, Shape::SMEM_BYTES>>>(
                dQ, dPool, dQo, dKv, dIdx, dLast, 0, pages, PAGE, H, KVH, 1, -1, 0, 1.f / sqrtf((float)D), dOut);
        };
        for (int i = 0; i < 2; ++i) launch();
        CHECK(cudaGetLastError());
        cudaEvent_t start, end;
        CHECK(cudaEventCreate(&start));
        CHECK(cudaEventCreate(&end));
        std::vector<float> ms;
        for (int i = 0; i < 10; ++i) {
            CHECK(cudaEventRecord(start));
            launch();
            CHECK(cudaEventRecord(end));
            CHECK(cudaEventSynchronize(end));
            float t;
            CHECK(cudaEventElapsedTime(&t, start, end));
            ms.push_back(t);
        }
        CHECK(cudaGetLastError());
        std::sort(ms.begin(), ms.end());
        const double flops = batch * 4.0 * H * D * (double)tokens * (tokens + 1) / 2;
        std::printf("| %d | %d | %.3f | %.1f |\n", tokens, batch, ms[5], flops / (ms[5] * 1e-3) / 1e12);
        for (void* p : {(void*)dPool, (void*)dQ, (void*)dOut, (void*)dIdx, (void*)dQo, (void*)dKv, (void*)dLast})
            CHECK(cudaFree(p));
    }
    return 0;
}
