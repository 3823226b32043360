// The rotation of one RoPE pair, one definition for rope_inplace, qkv_rope_append and the skinny matmul's qkv
// epilogue.
#pragma once

namespace mstar {

// The pair (x1, x2) rotated by the angle of cosine c and sine s: its first element, or its second. Each product and
// the sum rounded on their own (no fused multiply-add): left to the compiler, each kernel's expression was
// contracted its own way (one kernel fused x1·s into the sum, another x2·c), so the kernels differed in the last
// bit; the CPU's float arithmetic never fuses either.
__device__ __forceinline__ float rope_rotate(float x1, float x2, float c, float s, bool first) {
    return first ? __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)) : __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}

}  // namespace mstar
