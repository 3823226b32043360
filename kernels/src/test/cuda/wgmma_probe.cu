// One warpgroup product on the GPU against a host loop, to tell a wrong operand layout, descriptor or accumulator
// mapping (wgmma.cuh) apart from a wrong kernel around them: A 64 x 64 and B 256 x 64 (K-major bf16, small integers so
// every sum is exact) are staged in the 128-byte swizzled layout, four k16 products give D 64 x 256, and each thread
// writes its accumulators where wgmma.cuh says they belong. Then attention's two products: S = Q Kᵀ (64 x 128, K = 128
// over two 64-column blocks of the layout) and O = P V with P from registers (S's accumulators packed to bf16) and V
// (128 keys x 128) read MN-major through wgmma_desc_mn; the transposed read is tried with the descriptor's two byte
// offsets as wgmma.cuh sets them and swapped, so a wrong reading of the leading and stride fields shows as one of the
// two failing. Prints the wrong entries (at most 8 a test) and their counts.
// Build and run on a Hopper GPU: nvcc -arch=sm_90a -std=c++17 -I../../main/cuda -o /tmp/wgmma_probe wgmma_probe.cu
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "mma.cuh"
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


// Tiles of `rows` rows and 128 columns as two 64-column blocks of the swizzled layout, `rows` * 128 bytes each.
__device__ void stage128(unsigned char* dst, const __nv_bfloat16* src, int rows) {
    for (int i = threadIdx.x; i < rows * 16; i += blockDim.x) {
        const int row = i / 16, c = i % 16;
        *reinterpret_cast<uint4*>(dst + (c / 8) * rows * 128 + wgmma_swizzled(row, c % 8)) =
            *reinterpret_cast<const uint4*>(src + row * 128 + 8 * c);
    }
}

// q 64 x 128, k and v 128 x 128 (row-major); s = q kᵀ and o = bf16(s) v, both 64 x 128 fp32.
__global__ void attention_probe(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, float* s,
                                float* o, int swapped) {
    extern __shared__ __align__(1024) unsigned char smem[];
    stage128(smem, q, 64);                    // 16 KB
    stage128(smem + 16384, k, 128);           // 32 KB
    stage128(smem + 16384 + 32768, v, 128);   // 32 KB
    fence_async_shared();
    __syncthreads();
    const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    float acc[64], out[64];
    wgmma_fence();
    for (int ks = 0; ks < 8; ++ks) {
        const uint32_t off = (ks / 4) * 1, col = (ks % 4) * 32;
        wgmma_m64n128k16_bf16(acc, wgmma_desc(base + off * 8192 + col), wgmma_desc(base + 16384 + off * 16384 + col),
                              ks > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(acc);
    uint64_t dv = wgmma_desc_mn(base + 49152, 16384);
    if (swapped) {  // leading and stride fields exchanged
        const uint64_t lead = (dv >> 16) & 0x3FFF, stride = (dv >> 32) & 0x3FFF;
        dv = (dv & ~((0x3FFFull << 16) | (0x3FFFull << 32))) | (stride << 16) | (lead << 32);
    }
    uint32_t a[8][4];  // every A fragment before the products, as the kernels do
    for (int kk = 0; kk < 8; ++kk)
        for (int i = 0; i < 4; ++i) a[kk][i] = pack_bf16(acc[8 * kk + 2 * i], acc[8 * kk + 2 * i + 1]);
    wgmma_fence();
    for (int kk = 0; kk < 8; ++kk) wgmma_m64n128k16_bf16_rt(out, a[kk], dv + 128 * kk, kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(out);
    const int t = threadIdx.x, w = t / 32, g = t % 32 / 4, qq = t % 4;
    for (int i = 0; i < 64; ++i) {
        const int at = (16 * w + g + 8 * (i / 2 % 2)) * 128 + 8 * (i / 4) + 2 * qq + i % 2;
        s[at] = acc[i];
        o[at] = out[i];
    }
}

static int compare(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
    int wrong = 0;
    for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != want[i] && wrong++ < 8)
            std::printf("%s[%zu][%zu] = %g, want %g\n", what, i / 128, i % 128, got[i], want[i]);
    std::printf("%s: %d of %zu entries wrong\n", what, wrong, got.size());
    return wrong;
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

    // Attention's products: small integers again; S's entries stay exact in bf16 (|s| <= 128 * 4 = 512 < 2^9, integers)
    std::vector<__nv_bfloat16> q(64 * 128), k(128 * 128), v(128 * 128);
    std::vector<float> fq(q.size()), fk(k.size()), fv(v.size());
    for (size_t i = 0; i < q.size(); ++i) q[i] = __float2bfloat16(fq[i] = (float)(rand() % 5 - 2));
    for (size_t i = 0; i < k.size(); ++i) k[i] = __float2bfloat16(fk[i] = (float)(rand() % 5 - 2));
    for (size_t i = 0; i < v.size(); ++i) v[i] = __float2bfloat16(fv[i] = (float)(rand() % 5 - 2));
    std::vector<float> wantS(64 * 128), wantO(64 * 128, 0.f);
    for (int m = 0; m < 64; ++m)
        for (int n = 0; n < 128; ++n) {
            float acc = 0;
            for (int e = 0; e < 128; ++e) acc += fq[m * 128 + e] * fk[n * 128 + e];
            wantS[m * 128 + n] = __bfloat162float(__float2bfloat16(acc));
        }
    for (int m = 0; m < 64; ++m)
        for (int n = 0; n < 128; ++n) {
            double acc = 0;
            for (int j = 0; j < 128; ++j) acc += (double)wantS[m * 128 + j] * fv[j * 128 + n];
            wantO[m * 128 + n] = (float)acc;
        }
    for (int m = 0; m < 64; ++m)  // S unrounded for the comparison of S itself
        for (int n = 0; n < 128; ++n) {
            float acc = 0;
            for (int e = 0; e < 128; ++e) acc += fq[m * 128 + e] * fk[n * 128 + e];
            wantS[m * 128 + n] = acc;
        }
    __nv_bfloat16 *gq, *gk, *gv;
    float *gs, *go;
    cudaMalloc(&gq, q.size() * 2);
    cudaMalloc(&gk, k.size() * 2);
    cudaMalloc(&gv, v.size() * 2);
    cudaMalloc(&gs, 64 * 128 * 4);
    cudaMalloc(&go, 64 * 128 * 4);
    cudaMemcpy(gq, q.data(), q.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(gk, k.data(), k.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(gv, v.data(), v.size() * 2, cudaMemcpyHostToDevice);
    cudaFuncSetAttribute(attention_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 81 * 1024);
    int attentionWrong = 0;
    for (int swapped = 0; swapped < 2; ++swapped) {
        attention_probe<<<1, 128, 81 * 1024>>>(gq, gk, gv, gs, go, swapped);
        const cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
            std::printf("attention probe: %s\n", cudaGetErrorString(e));
            return 1;
        }
        std::vector<float> gotS(64 * 128), gotO(64 * 128);
        cudaMemcpy(gotS.data(), gs, gotS.size() * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(gotO.data(), go, gotO.size() * 4, cudaMemcpyDeviceToHost);
        if (swapped == 0) attentionWrong += compare("S = Q K^T", gotS, wantS);
        const int w = compare(swapped ? "O = P V, offsets swapped" : "O = P V, wgmma_desc_mn", gotO, wantO);
        if (swapped == 0) attentionWrong += w;
    }
    return wrong != 0 || attentionWrong != 0;
}
