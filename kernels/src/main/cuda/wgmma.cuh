// Hopper's warpgroup matrix products (wgmma.mma_async, sm_90a): the 4 warps of a warpgroup multiply a 64-row tile
// of A by an N-row tile of B, both bf16 and K-major in shared memory, into fp32 accumulators spread over the
// warpgroup's registers. The product runs asynchronously: the tensor cores read the operands from shared memory while
// the warps go on (issuing the next copies), and a wait on the committed groups hands the accumulators back.
// Per thread t of the warpgroup (warp w = t / 32, g = t % 32 / 4, q = t % 4), accumulator d[4j + v] is row
// 16w + g + 8 (v / 2) and column 8j + 2q + v % 2 of the 64 x N result: mma.sync's m16n8 fragment for each 8 columns.
#pragma once

#include "common.cuh"
#include "mma.cuh"

namespace mstar {

// The 128-byte swizzled layout the descriptors below name: a tile of rows of 64 bf16 (128 bytes, one K chunk), row r
// at r * 128, its 16-byte piece c (K elements 8c .. 8c + 7) at piece c ^ (r % 8), so that the 8 rows a product
// reads at one K offset lie in different banks. Tiles start on 1024 bytes (the swizzle is of address bits).
__host__ __device__ constexpr uint32_t wgmma_swizzled(int row, int piece) {
    return (uint32_t)row * 128 + ((uint32_t)(piece ^ (row & 7)) << 4);
}

// The block's dynamic shared memory from its first 1024-byte boundary on (the swizzle is of address bits 7-9), for
// tiles in the layout below; a launch asks for 1024 bytes more than its tiles take.
__device__ __forceinline__ unsigned char* wgmma_tiles(unsigned char* raw) {
    return raw + ((1024 - (smem_addr(raw) & 1023)) & 1023);
}

// Descriptor of a K-major operand at shared address `addr` in that layout: 8-row groups 1024 bytes apart (the stride
// field, in 16-byte units), the leading field unused with this swizzle (1 by convention), swizzle mode 1 (128 bytes).
// Adding 2 to a descriptor moves it 32 bytes on: the next 16 K elements of the same rows.
__host__ __device__ constexpr uint64_t wgmma_desc(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

// Descriptor of an MN-major operand at `addr`: B of d = A · B stored as K rows of N elements (as V is stored [key][d]),
// in the same layout: row k of a block holds 64 N elements (128 bytes), 8-row groups of K lie 1024 bytes apart (the
// stride field) and the next 64 N elements `blockBytes` on (the leading field). Adding 128 to a descriptor moves it
// 2048 bytes on: the next 16 K rows.
__host__ __device__ constexpr uint64_t wgmma_desc_mn(uint32_t addr, uint32_t blockBytes) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((blockBytes >> 4) & 0x3FFF) << 16) | (64ull << 32) |
           (1ull << 62);
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

// The asm output operands of 32 accumulators d[i .. i + 31], in order.
#define MSTAR_WG_ACC2(i) "+f"(d[i]), "+f"(d[i + 1])
#define MSTAR_WG_ACC8(i) MSTAR_WG_ACC2(i), MSTAR_WG_ACC2(i + 2), MSTAR_WG_ACC2(i + 4), MSTAR_WG_ACC2(i + 6)
#define MSTAR_WG_ACC32(i) MSTAR_WG_ACC8(i), MSTAR_WG_ACC8(i + 8), MSTAR_WG_ACC8(i + 16), MSTAR_WG_ACC8(i + 24)

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
        : MSTAR_WG_ACC32(0), MSTAR_WG_ACC32(32), MSTAR_WG_ACC32(64), MSTAR_WG_ACC32(96)
        : "l"(a), "l"(b), "r"(accumulate));
}

// d (64 x 64) = A (64 x 16) · B (64 x 16)ᵀ, plus d when `accumulate`; A and B K-major bf16 (wgmma_desc).
__device__ __forceinline__ void wgmma_m64n64k16_bf16(float (&d)[32], uint64_t a, uint64_t b, int accumulate) {
    MSTAR_WGMMA(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : MSTAR_WG_ACC32(0)
        : "l"(a), "l"(b), "r"(accumulate));
}

// d (64 x 128) = A (64 x 16) · B (128 x 16)ᵀ, plus d when `accumulate`; A and B K-major bf16 (wgmma_desc).
__device__ __forceinline__ void wgmma_m64n128k16_bf16(float (&d)[64], uint64_t a, uint64_t b, int accumulate) {
    MSTAR_WGMMA(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : MSTAR_WG_ACC32(0), MSTAR_WG_ACC32(32)
        : "l"(a), "l"(b), "r"(accumulate));
}

// d (64 x 128) = A (64 x 16) · B (16 x 128), plus d when `accumulate`; A from registers, B MN-major bf16
// (wgmma_desc_mn). Warp w's A fragment is mma.sync's m16n8k16 one for rows 16w .. 16w + 15: a[0] rows g, K columns
// 2q and 2q + 1, a[1] row g + 8, a[2] and a[3] the same rows at K 2q + 8, 2q + 9 (bf16 pairs). Accumulators
// d[4j + v] of j = 2kk and 2kk + 1 are exactly that for columns 16kk .. 16kk + 15: a product's result feeds the next
// one's A in place, as flash attention's P does.
__device__ __forceinline__ void wgmma_m64n128k16_bf16_rt(float (&d)[64], const uint32_t (&a)[4], uint64_t b,
                                                        int accumulate) {
    MSTAR_WGMMA(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : MSTAR_WG_ACC32(0), MSTAR_WG_ACC32(32)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

// d (64 x 192) = A (64 x 16) · B (16 x 192), plus d when `accumulate`; as wgmma_m64n128k16_bf16_rt.
__device__ __forceinline__ void wgmma_m64n192k16_bf16_rt(float (&d)[96], const uint32_t (&a)[4], uint64_t b,
                                                        int accumulate) {
    MSTAR_WGMMA(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
        "}, {%96, %97, %98, %99}, %100, p, 1, 1, 1;\n}\n"
        : MSTAR_WG_ACC32(0), MSTAR_WG_ACC32(32), MSTAR_WG_ACC32(64)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
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
#undef MSTAR_WG_ACC32
#undef MSTAR_WG_ACC8
#undef MSTAR_WG_ACC2
#undef MSTAR_WGMMA
#endif

}  // namespace mstar
