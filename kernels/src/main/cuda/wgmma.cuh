// Hopper's warpgroup matrix products (wgmma.mma_async, sm_90a): the 4 warps of a warpgroup multiply a 64-row tile
// of A by an N-row tile of B, both bf16 and K-major in shared memory, into fp32 accumulators spread over the
// warpgroup's registers. The product runs asynchronously: the tensor cores read the operands from shared memory while
// the warps go on (issuing the next copies), and a wait on the committed groups hands the accumulators back.
// Per thread t of the warpgroup (warp w = t / 32, g = t % 32 / 4, q = t % 4), accumulator d[4j + v] is row
// 16w + g + 8 (v / 2) and column 8j + 2q + v % 2 of the 64 x N result: mma.sync's m16n8 fragment for each 8 columns.
#pragma once

#include "common.cuh"

namespace mstar {

// The 128-byte swizzled layout the descriptors below name: a tile of rows of 64 bf16 (128 bytes, one K chunk), row r
// at r * 128, its 16-byte piece c (K elements 8c .. 8c + 7) at piece c ^ (r % 8), so that the 8 rows a product
// reads at one K offset lie in different banks. Tiles start on 1024 bytes (the swizzle is of address bits).
__host__ __device__ constexpr uint32_t wgmma_swizzled(int row, int piece) {
    return (uint32_t)row * 128 + ((uint32_t)(piece ^ (row & 7)) << 4);
}

// Descriptor of a K-major operand at shared address `addr` in that layout: 8-row groups 1024 bytes apart (the stride
// field, in 16-byte units), the leading field unused with this swizzle (1 by convention), swizzle mode 1 (128 bytes).
// Adding 2 to a descriptor moves it 32 bytes on: the next 16 K elements of the same rows.
__host__ __device__ constexpr uint64_t wgmma_desc(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

#ifndef MSTAR_HOST_EMULATION  // kernels/emulation/wgmma_shim.h provides host versions of what follows
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MSTAR_WGMMA(...) asm volatile(__VA_ARGS__)
#else  // sm_90a only: elsewhere the kernels built on these compile to nothing, and CudaMoe never launches them
#define MSTAR_WGMMA(...)
#endif

// Orders the warpgroup's earlier accesses of the accumulators before the products issued next.
__device__ __forceinline__ void wgmma_fence() { MSTAR_WGMMA("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { MSTAR_WGMMA("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed groups of this warpgroup's products are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    MSTAR_WGMMA("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Makes this thread's writes to shared memory (stores, completed cp.async) visible to the tensor cores' reads.
__device__ __forceinline__ void fence_async_shared() { MSTAR_WGMMA("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keeps the compiler from moving accesses of the accumulators across an asynchronous product.
template <int N>
__device__ __forceinline__ void wgmma_hold(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (64 x 256) = A (64 x 16) · B (256 x 16)ᵀ, plus d when `accumulate`; A and B K-major bf16 (wgmma_desc).
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], uint64_t a, uint64_t b, int accumulate) {
    MSTAR_WGMMA(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(a), "l"(b), "r"(accumulate));
}

// Asynchronous bulk copy of `bytes` (a multiple of 16, both ends 16-byte aligned) from shared address `src` to global
// `dst`, by the copy engine: the thread goes on at once. Its shared-memory source must have been made visible with
// fence_async_shared; bulk_wait_read waits until the sources of this thread's committed copies have been read, after
// which the shared memory may be reused or the block may exit (the global writes complete with the grid).
__device__ __forceinline__ void bulk_store(void* dst, uint32_t src, int bytes) {
    MSTAR_WGMMA("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
                : "memory");
}
__device__ __forceinline__ void bulk_commit() { MSTAR_WGMMA("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read() { MSTAR_WGMMA("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
#undef MSTAR_WGMMA
#endif

}  // namespace mstar
