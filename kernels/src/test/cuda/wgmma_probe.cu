// One warpgroup product on the GPU against a host loop, to tell a wrong operand layout, descriptor or accumulator
// mapping (wgmma.cuh) apart from a wrong kernel around them: A 64 x 64 and B 256 x 64 (K-major bf16, small integers so
// every sum is exact) are staged in the 128-byte swizzled layout, four k16 products give D 64 x 256, and each thread
// writes its accumulators where wgmma.cuh says they belong. Prints the wrong entries (at most 8) and their count.
// Build and run on a Hopper GPU: nvcc -arch=sm_90a -std=c++17 -I../../main/cuda -o /tmp/wgmma_probe wgmma_probe.cu
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "wgmma.cuh"

using namespace mstar;

__global__ void probe(const __nv_bfloat16* a, const __nv_bfloat16* b, float* d) {
    extern __shared__ __align__(1024) unsigned char smem[];
    // A in the first 8 KB, B after it; piece p of row r at its swizzled place
    for (int i = threadIdx.x; i < (64 + 256) * 8; i += blockDim.x) {
        const int row = i / 8, piece = i % 8;
        const __nv_bfloat16* src = row < 64 ? a + row * 64 + 8 * piece : b + (row - 64) * 64 + 8 * piece;
        unsigned char* dst = row < 64 ? smem + wgmma_swizzled(row, piece) : smem + 8192 + wgmma_swizzled(row - 64, piece);
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    }
    fence_async_shared();
    __syncthreads();
    float acc[128];
    const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    const uint64_t da = wgmma_desc(base), db = wgmma_desc(base + 8192);
    wgmma_fence();
    for (int ks = 0; ks < 4; ++ks) wgmma_m64n256k16_bf16(acc, da + 2 * ks, db + 2 * ks, ks > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(acc);
    const int t = threadIdx.x, w = t / 32, g = t % 32 / 4, q = t % 4;
    for (int i = 0; i < 128; ++i) d[(16 * w + g + 8 * (i / 2 % 2)) * 256 + 8 * (i / 4) + 2 * q + i % 2] = acc[i];
}

int main() {
    std::vector<__nv_bfloat16> a(64 * 64), b(256 * 64);
    std::vector<float> fa(a.size()), fb(b.size());
    srand(3);
    for (size_t i = 0; i < a.size(); ++i) a[i] = __float2bfloat16(fa[i] = (float)(rand() % 7 - 3));
    for (size_t i = 0; i < b.size(); ++i) b[i] = __float2bfloat16(fb[i] = (float)(rand() % 7 - 3));
    __nv_bfloat16 *ga, *gb;
    float* gd;
    cudaMalloc(&ga, a.size() * 2);
    cudaMalloc(&gb, b.size() * 2);
    cudaMalloc(&gd, 64 * 256 * 4);
    cudaMemcpy(ga, a.data(), a.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(gb, b.data(), b.size() * 2, cudaMemcpyHostToDevice);
    cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 48 * 1024);
    probe<<<1, 128, 41 * 1024>>>(ga, gb, gd);
    const cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        std::printf("wgmma probe: %s\n", cudaGetErrorString(err));
        return 1;
    }
    std::vector<float> d(64 * 256);
    cudaMemcpy(d.data(), gd, d.size() * 4, cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int m = 0; m < 64; ++m)
        for (int n = 0; n < 256; ++n) {
            float want = 0;
            for (int k = 0; k < 64; ++k) want += fa[m * 64 + k] * fb[n * 64 + k];
            if (d[m * 256 + n] != want && wrong++ < 8) std::printf("d[%d][%d] = %g, want %g\n", m, n, d[m * 256 + n], want);
        }
    std::printf("wgmma probe: %d of %d entries wrong\n", wrong, 64 * 256);
    return wrong != 0;
}
