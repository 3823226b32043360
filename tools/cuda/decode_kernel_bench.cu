// Times the paged decode attention kernels (attention_decode.cu: the CUDA-core one that ran bf16 d128 before,
// and the tensor-core one that runs it now), each also with two other split counts, alone, without Java, so that
// they can be compared in one GPU call: Llama-3.1-8B attention geometry (32 query /
// 8 KV heads of 128, bf16 pool, 16-token pages in random order), one query per sequence, batch x keys from
// 1 x 512 to 16 x 16384. Every variant gets the splits, slices and grid width CudaAttention.decode computes
// (with its own blocks per SM; "ceil splits" rows: as the launcher computed them before, "fill splits" rows:
// wave_filling_splits), its output is checked against the CUDA-core kernel's (max |diff| / max |ref|
// over the batch; over 1e-2 fails), and each cell is the median of 10 event-timed launches over layers
// rotated so that the K/V bytes come from memory, not L2, with TB/s of the K/V and Q bytes read. Build and
// run on the GPU machine (under a minute):
//   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -I kernels/src/main/cuda \
//        -o /tmp/dkb tools/cuda/decode_kernel_bench.cu && /tmp/dkb
// Add -Xptxas -v for the kernels' registers and spills. The other tile shapes and pipelines tried before the
// tensor-core kernel was chosen (docs/results/2026-12-02/perf-table.md) were variants in this bench at commit 59f54c9.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention_decode.cu"

#include "bench_check.cuh"

namespace {

using bf16 = __nv_bfloat16;
constexpr int H = 32, KVH = 8, D = 128, PAGE = 16, GH = 4;
constexpr int BLOCKS_PER_ROW = KVH * (H / KVH / GH);
constexpr double L2_DEFEAT_BYTES = 256.0 * (1 << 20);  // K/V bytes cycled through before a layer repeats

// How many splits the host asks for: CudaAttention's floor(resident blocks / blocks) (never more than one wave
// when the sequences fit in one); the ceil of it that the launcher used before; or wave_filling_splits.
enum class Splits { FLOOR, CEIL, FILL };

using DecodeKernel = void (*)(const bf16*, const void*, const int*, const int*, const int*, const int*, int, int,
                              int, int, int, int, int, int, float, int, int, bf16*, float*, float*, int*);

struct Variant {
    std::string name;
    DecodeKernel kernel;
    int threads, smem, blocksPerSm;
    Splits policy = Splits::FLOOR;
};

// CudaAttention.decodeSplits / maxSlices / gridWidth, with the variant's resident blocks per SM.
struct Grid {
    int splits, slices, width;
};

// Instead of the launcher's floor(slots / blocks) splits (which can leave a last wave a fraction full when
// the sequences need several, e.g. 64 x 4k with 3 blocks per SM: 2 slices of 2048 keys, 2.59 waves), the
// fewest splits whose blocks fill their last wave at least 90 % (one wave at most when the sequences fit in
// one), each slice between kMinSplitKeys and kMaxSliceKeys keys. It assumes every sequence is span keys long:
// with a mixed batch it cuts short sequences for nothing. Only the host's splits argument changes.
int wave_filling_splits(long long blocks, int span, long long slots) {
    const int fewest = std::max(1, (span + kMaxSliceKeys - 1) / kMaxSliceKeys);
    const int most = std::max(fewest, (span + kMinSplitKeys - 1) / kMinSplitKeys);
    if (blocks * fewest <= slots) return (int)std::max<long long>(fewest, std::min<long long>(most, slots / blocks));
    int best = fewest;
    double bestFill = 0;
    for (int n = fewest; n <= most; ++n) {
        const double waves = (double)blocks * n / slots, fill = waves / std::ceil(waves);
        if (fill >= 0.9) return n;
        if (fill > bestFill) best = n, bestFill = fill;
    }
    return best;
}

Grid decode_grid(int rows, int span, int sms, int blocksPerSm, Splits policy) {
    const long long blocks = (long long)rows * BLOCKS_PER_ROW, slots = (long long)blocksPerSm * sms;
    const long long forOccupancy =
        std::max(1LL, policy == Splits::FLOOR ? slots / blocks : (slots + blocks - 1) / blocks);
    const long long forLength = (span + kMinSplitKeys - 1) / kMinSplitKeys;
    const int splits = policy == Splits::FILL ? wave_filling_splits(blocks, span, slots)
                                              : (int)std::max(1LL, std::min(forOccupancy, forLength));
    const long long sliceKeys = std::min(kMaxSliceKeys, (kSplitPages - 1) * PAGE);
    const int slices = (int)std::max<long long>(splits, (span + sliceKeys - 1) / sliceKeys);
    const long long waves = (4LL * blocksPerSm * sms + blocks - 1) / blocks;
    const int width = (int)std::max<long long>(splits, std::min<long long>(slices, waves));
    return {splits, slices, width};
}

__global__ void fill_random(bf16* p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)i * 2654435761u ^ seed;
        x ^= x >> 16;
        x *= 0x7feb352du;
        x ^= x >> 15;
        x *= 0x846ca68bu;
        x ^= x >> 16;
        p[i] = __float2bfloat16((x >> 8) * (3.4641f / 16777216.f) - 1.7320f);  // uniform, variance 1
    }
}

// Reads n 16-byte vectors and folds them into one word per thread: the read bandwidth a decode kernel can reach.
__global__ void read_all(const uint4* p, size_t n, unsigned* sink) {
    unsigned x = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldcs(p + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x12345678u) *sink = x;  // keeps the loads; practically never stores
}

struct Case {
    int batch, keys;
};

// One case's device buffers: the pool holds `layers` copies of the batch's pages, cycled by the timed launches.
struct Buffers {
    int layers, pages;
    bf16 *pool, *q, *out;
    int *qo, *kvIndptr, *indices, *last, *splitDone;
    float *partialO, *partialLse;
};

Buffers make_buffers(const Case& c, int maxSlices, std::mt19937& rng) {
    Buffers b{};
    const int perSeq = c.keys / PAGE;
    b.pages = perSeq * c.batch;
    const double layerBytes = (double)b.pages * 2 * PAGE * KVH * D * sizeof(bf16);
    b.layers = std::max(1, (int)std::ceil(L2_DEFEAT_BYTES / layerBytes));
    const size_t poolElems = (size_t)b.layers * b.pages * 2 * PAGE * KVH * D, qElems = (size_t)c.batch * H * D;
    CHECK(cudaMalloc(&b.pool, poolElems * sizeof(bf16)));
    CHECK(cudaMalloc(&b.q, qElems * sizeof(bf16)));
    CHECK(cudaMalloc(&b.out, qElems * sizeof(bf16)));
    fill_random<<<1024, 256>>>(b.pool, poolElems, 11u);
    fill_random<<<64, 256>>>(b.q, qElems, 29u);
    std::vector<int> indices(b.pages), qo(c.batch + 1), kvp(c.batch + 1), last(c.batch, PAGE);
    std::iota(indices.begin(), indices.end(), 0);
    std::shuffle(indices.begin(), indices.end(), rng);
    for (int r = 0; r <= c.batch; ++r) qo[r] = r, kvp[r] = r * perSeq;
    CHECK(cudaMalloc(&b.qo, (c.batch + 1) * 4));
    CHECK(cudaMalloc(&b.kvIndptr, (c.batch + 1) * 4));
    CHECK(cudaMalloc(&b.indices, b.pages * 4));
    CHECK(cudaMalloc(&b.last, c.batch * 4));
    CHECK(cudaMalloc(&b.splitDone, c.batch * BLOCKS_PER_ROW * 4));
    CHECK(cudaMemset(b.splitDone, 0, c.batch * BLOCKS_PER_ROW * 4));
    CHECK(cudaMalloc(&b.partialO, (size_t)c.batch * H * maxSlices * D * 4));
    CHECK(cudaMalloc(&b.partialLse, (size_t)c.batch * H * maxSlices * 4));
    CHECK(cudaMemcpy(b.qo, qo.data(), (c.batch + 1) * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b.kvIndptr, kvp.data(), (c.batch + 1) * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b.indices, indices.data(), b.pages * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b.last, last.data(), c.batch * 4, cudaMemcpyHostToDevice));
    return b;
}

void free_buffers(Buffers& b) {
    for (void* p : {(void*)b.pool, (void*)b.q, (void*)b.out, (void*)b.qo, (void*)b.kvIndptr, (void*)b.indices,
                    (void*)b.last, (void*)b.splitDone, (void*)b.partialO, (void*)b.partialLse})
        CHECK(cudaFree(p));
}

void launch(const Variant& v, const Case& c, const Buffers& b, const Grid& g, int layer) {
    v.kernel<<<dim3(g.width, BLOCKS_PER_ROW, c.batch), v.threads, v.smem>>>(
        b.q, b.pool, b.qo, b.kvIndptr, b.indices, b.last, layer, b.pages, PAGE, H, KVH, 1, -1, 0,
        1.f / std::sqrt((float)D), g.splits, g.slices, b.out, b.partialO, b.partialLse, b.splitDone);
}

std::vector<float> output(const Case& c, const Buffers& b) {
    std::vector<bf16> raw((size_t)c.batch * H * D);
    CHECK(cudaMemcpy(raw.data(), b.out, raw.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
    std::vector<float> f(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) f[i] = __bfloat162float(raw[i]);
    return f;
}

float median_ms(const std::vector<float>& ms) {
    std::vector<float> s = ms;
    std::sort(s.begin(), s.end());
    return 0.5f * (s[s.size() / 2 - 1] + s[s.size() / 2]);
}

float time_ms(const std::function<void(int)>& run, int rotate) {
    cudaEvent_t start, end;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&end));
    for (int i = 0; i < 2; ++i) run(i % rotate);
    std::vector<float> ms;
    for (int i = 0; i < 10; ++i) {
        CHECK(cudaEventRecord(start));
        run((i + 2) % rotate);
        CHECK(cudaEventRecord(end));
        CHECK(cudaEventSynchronize(end));
        float t;
        CHECK(cudaEventElapsedTime(&t, start, end));
        ms.push_back(t);
    }
    CHECK(cudaGetLastError());
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(end));
    return median_ms(ms);
}

}  // namespace

int main(int argc, char** argv) {
    int sms;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("%s, %d SMs, L2 %d MiB\n", prop.name, sms, prop.l2CacheSize >> 20);

    {  // device-to-device copy of 1 GiB: the bandwidth a memory-bound kernel could reach
        const size_t bytes = 1ull << 30;
        void *src, *dst;
        CHECK(cudaMalloc(&src, bytes));
        CHECK(cudaMalloc(&dst, bytes));
        CHECK(cudaMemset(src, 1, bytes));
        const float ms = time_ms([&](int) { CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); }, 1);
        std::printf("device-to-device copy 1 GiB: %.1f us, %.2f TB/s read + write\n", ms * 1e3,
                    2.0 * bytes / (ms * 1e-3) / 1e12);
        const float readMs = time_ms(
            [&](int) { read_all<<<sms * 8, 512>>>((const uint4*)src, bytes / 16, (unsigned*)dst); }, 1);
        std::printf("read-only 1 GiB: %.1f us, %.2f TB/s\n", readMs * 1e3, bytes / (readMs * 1e-3) / 1e12);
        CHECK(cudaFree(src));
        CHECK(cudaFree(dst));
    }

    std::vector<Variant> variants;
    {
        DecodeKernel simt = attn_decode_bf16_d128_g4;
        int blocks = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, simt, kDecodeWarps * 32, 0));
        variants.push_back({"simt (attention_decode)", simt, kDecodeWarps * 32, 0, 4});  // DECODE_BLOCKS_PER_SM
        std::printf("CUDA-core kernel: %d blocks/SM resident (launcher assumes 4)\n", blocks);
    }
    {
        DecodeKernel tc = attn_decode_tc_bf16_d128_g4;
        const int smem = TcDecodeShape<D>::STAGING_BYTES;
        CHECK(cudaFuncSetAttribute(tc, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        int blocks = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, tc, kTcDecodeWarps * 32, smem));
        variants.push_back({"tc (attention_decode)", tc, kTcDecodeWarps * 32, smem, blocks});
        for (const Variant& base : {variants[0], variants[1]}) {
            for (Splits policy : {Splits::CEIL, Splits::FILL}) {
                Variant v = base;
                v.name = base.name.substr(0, base.name.find(' '));
                v.name += policy == Splits::CEIL ? " ceil splits" : " fill splits";
                v.policy = policy;
                variants.push_back(v);
            }
        }
    }
    std::printf("%-24s %6s %8s\n", "variant", "blk/SM", "smem B");
    for (auto& v : variants) std::printf("%-24s %6d %8d\n", v.name.c_str(), v.blocksPerSm, v.smem);

    const std::vector<Case> cases = {{1, 512},  {16, 512},  {64, 512},   {256, 512},  {1, 4096},
                                     {16, 4096}, {64, 4096}, {1, 16384}, {16, 16384}};
    std::mt19937 rng(7);
    // times[variant][case], errors[variant] (max over cases)
    std::vector<std::vector<float>> us(variants.size(), std::vector<float>(cases.size()));
    std::vector<double> err(variants.size(), 0.0);
    std::vector<double> tbs(variants.size() * cases.size());
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        const Case& c = cases[ci];
        int maxSlices = 1;
        for (auto& v : variants)
            maxSlices = std::max(maxSlices, decode_grid(c.batch, c.keys, sms, v.blocksPerSm, v.policy).slices);
        Buffers b = make_buffers(c, maxSlices, rng);
        const double bytes = (double)c.batch * c.keys * KVH * D * 2 * sizeof(bf16) + (double)c.batch * H * D * 2;
        std::vector<float> ref;
        for (size_t vi = 0; vi < variants.size(); ++vi) {
            const Variant& v = variants[vi];
            const Grid g = decode_grid(c.batch, c.keys, sms, v.blocksPerSm, v.policy);
            CHECK(cudaMemset(b.out, 0, (size_t)c.batch * H * D * sizeof(bf16)));
            CHECK(cudaMemset(b.splitDone, 0, c.batch * BLOCKS_PER_ROW * 4));  // a faulty variant may leave counts
            launch(v, c, b, g, 0);
            CHECK(cudaDeviceSynchronize());
            const std::vector<float> o = output(c, b);
            if (vi == 0) ref = o;
            double maxDiff = 0, maxRef = 0;
            for (size_t i = 0; i < o.size(); ++i) {
                maxDiff = std::max(maxDiff, (double)std::fabs(o[i] - ref[i]));
                maxRef = std::max(maxRef, (double)std::fabs(ref[i]));
            }
            const double e = std::isfinite(maxDiff) ? maxDiff / maxRef : INFINITY;
            err[vi] = std::max(err[vi], std::isnan(e) ? INFINITY : e);
            us[vi][ci] = 1e3f * time_ms([&](int layer) { launch(v, c, b, g, layer); }, b.layers);
            tbs[vi * cases.size() + ci] = bytes / (us[vi][ci] * 1e-6) / 1e12;
            const int sliceKeys = std::min(std::min(kMaxSliceKeys, (kSplitPages - 1) * PAGE),
                                           std::max(kMinSplitKeys, (c.keys + g.splits - 1) / g.splits));
            const int slices = (c.keys + sliceKeys - 1) / sliceKeys;  // slice_keys in attention_decode.cu
            const double waves = (double)c.batch * BLOCKS_PER_ROW * slices / ((double)v.blocksPerSm * sms);
            std::printf("  %-24s %4d x %5d: %8.1f us %5.2f TB/s err %.2e (%d splits, %d slices, %.2f waves)\n",
                        v.name.c_str(), c.batch, c.keys, us[vi][ci], tbs[vi * cases.size() + ci], e, g.splits, slices,
                        waves);
            std::fflush(stdout);
            if (vi == 0) {
                std::printf("%4d x %5d: splits %d, slices %d, width %d, %d layers, %.1f MB K/V+Q\n", c.batch, c.keys,
                            g.splits, g.slices, g.width, b.layers, bytes / 1e6);
            }
        }
        free_buffers(b);
    }

    std::printf("\nus (TB/s of K/V+Q), median of 10; err = max |out - simt| / max |simt| over all cases\n");
    std::printf("%-24s", "variant");
    for (auto& c : cases) std::printf(" %14s", (std::to_string(c.batch) + "x" + std::to_string(c.keys)).c_str());
    std::printf(" %9s\n", "err");
    bool failed = false;
    for (size_t vi = 0; vi < variants.size(); ++vi) {
        std::printf("%-24s", variants[vi].name.c_str());
        for (size_t ci = 0; ci < cases.size(); ++ci)
            std::printf(" %7.1f (%4.2f)", us[vi][ci], tbs[vi * cases.size() + ci]);
        const bool bad = !(err[vi] <= 1e-2);
        failed |= bad;
        std::printf(" %9.2e%s\n", err[vi], bad ? "  FAIL: output differs from the CUDA-core kernel" : "");
    }
    if (failed) std::printf("\nFAILED: some variant's output exceeds 1e-2 relative error\n");
    return failed ? 1 : 0;
}
