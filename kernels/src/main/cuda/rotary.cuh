// The rotation of one RoPE pair, one definition for qkv_rope_append and the skinny matmul's qkv epilogue, so that
// both give the same bits.
#pragma once

namespace mstar {

// The pair (x1, x2) rotated by the angle of cosine c and sine s: its first element, or its second.
__device__ __forceinline__ float rope_rotate(float x1, float x2, float c, float s, bool first) {
    return first ? x1 * c - x2 * s : x2 * c + x1 * s;
}

}  // namespace mstar
