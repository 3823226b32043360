// Elementwise and row-gather ops: embedding, add, SiLU·mul, qkv split, dtype conversion, bias add.
#include "activations.cuh"
#include "common.cuh"

using namespace mstar;

// out[i, :] = table[ids[i], :]. An id outside the vocabulary yields a NaN row (no exceptions on a GPU;
// NaN makes the bad row visible downstream instead of silently reading another token).
extern "C" __global__ void embedding_gather(const void* table, int tableDt, const int* ids, void* out, int outDt,
                                            long long n, int hidden, int vocab) {
    mstar::await_previous_kernel();
    MSTAR_GRID_LOOP(i, n * hidden) {
        const long long row = i / hidden;
        const int col = (int)(i - row * hidden);
        const int tok = ids[row];
        const float v = (tok >= 0 && tok < vocab) ? load_f(table, tableDt, (long long)tok * hidden + col) : NAN;
        store_f(out, outDt, i, v);
    }
}

extern "C" __global__ void add_elements(const void* a, int aDt, const void* b, int bDt, void* out, int outDt,
                                        long long n) {
    mstar::await_previous_kernel();
    MSTAR_GRID_LOOP(i, n) { store_f(out, outDt, i, load_f(a, aDt, i) + load_f(b, bDt, i)); }
}

// out[r, i] = silu(gateUp[r, i]) * gateUp[r, inter + i].
extern "C" __global__ void silu_mul(const void* gateUp, int inDt, void* out, int outDt, long long rows, int inter) {
    mstar::await_previous_kernel();
    if (inDt == DT_BF16 && outDt == DT_BF16 && inter % 8 == 0 && reinterpret_cast<uintptr_t>(gateUp) % 16 == 0
        && reinterpret_cast<uintptr_t>(out) % 16 == 0) {
        // bf16: 8 elements a thread with 16-byte loads and stores, the same arithmetic per element (a grid of
        // one thread per element leaves most threads idle here).
        const uint4* gu = static_cast<const uint4*>(gateUp);
        uint4* o = static_cast<uint4*>(out);
        const int groups = inter / 8;
        MSTAR_GRID_LOOP(i, rows * groups) {
            const long long r = i / groups;
            const long long c = i - r * groups;
            const uint4 gv = gu[r * 2 * groups + c], uv = gu[r * 2 * groups + groups + c];
            const __nv_bfloat162* g2 = reinterpret_cast<const __nv_bfloat162*>(&gv);
            const __nv_bfloat162* u2 = reinterpret_cast<const __nv_bfloat162*>(&uv);
            uint4 ov;
            __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&ov);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float2 g = __bfloat1622float2(g2[j]), u = __bfloat1622float2(u2[j]);
                o2[j] = __floats2bfloat162_rn(silu_times(g.x, u.x), silu_times(g.y, u.y));
            }
            o[i] = ov;
        }
        return;
    }
    MSTAR_GRID_LOOP(i, rows * inter) {
        const long long r = i / inter;
        const long long c = i - r * inter;
        const float g = load_f(gateUp, inDt, r * 2 * inter + c);
        const float u = load_f(gateUp, inDt, r * 2 * inter + inter + c);
        store_f(out, outDt, i, silu_times(g, u));
    }
}

// out[r, i] = gelu_tanh(gateUp[r, i]) * gateUp[r, inter + i], GELU with PyTorch's tanh approximation (Gemma).
extern "C" __global__ void gelu_tanh_mul(const void* gateUp, int inDt, void* out, int outDt, long long rows,
                                         int inter) {
    mstar::await_previous_kernel();
    MSTAR_GRID_LOOP(i, rows * inter) {
        const long long r = i / inter;
        const long long c = i - r * inter;
        const float g = load_f(gateUp, inDt, r * 2 * inter + c);
        const float u = load_f(gateUp, inDt, r * 2 * inter + inter + c);
        store_f(out, outDt, i, gelu_tanh_times(g, u));
    }
}

// out = x * factor, elementwise (Gemma's embedding scale); out may be x.
extern "C" __global__ void scale_elements(const void* x, int xDt, void* out, int outDt, long long n, float factor) {
    mstar::await_previous_kernel();
    MSTAR_GRID_LOOP(i, n) { store_f(out, outDt, i, load_f(x, xDt, i) * factor); }
}

// The columns of qkv [rows, qw + kw + vw] into contiguous q [rows, qw], k [rows, kw], v [rows, vw]: one
// fused projection GEMM feeds RoPE, the KV append and attention, which all want dense heads.
extern "C" __global__ void split_qkv(const void* qkv, int inDt, void* q, int qDt, void* k, int kDt, void* v, int vDt,
                                     long long rows, int qw, int kw, int vw) {
    mstar::await_previous_kernel();
    const int width = qw + kw + vw;
    MSTAR_GRID_LOOP(i, rows * width) {
        const long long r = i / width;
        const int c = (int)(i - r * width);
        const float x = load_f(qkv, inDt, i);
        if (c < qw) {
            store_f(q, qDt, r * qw + c, x);
        } else if (c < qw + kw) {
            store_f(k, kDt, r * kw + (c - qw), x);
        } else {
            store_f(v, vDt, r * vw + (c - qw - kw), x);
        }
    }
}

extern "C" __global__ void convert_elements(const void* in, int inDt, void* out, int outDt, long long n) {
    mstar::await_previous_kernel();
    MSTAR_GRID_LOOP(i, n) { store_f(out, outDt, i, load_f(in, inDt, i)); }
}

// out[r, c] = acc[r, c] · rowScales[r] · colScales[c] + bias[c] (each left out where null), rounding once: the GEMM
// accumulated into fp32 scratch first (an FP8 product without its scales, say).
extern "C" __global__ void bias_add_cast(const float* acc, const float* rowScales, const float* colScales,
                                         const void* bias, int biasDt, void* out, int outDt, long long rows, int cols) {
    mstar::await_previous_kernel();
    MSTAR_GRID_LOOP(i, rows * cols) {
        const int c = (int)(i % cols);
        float v = acc[i];
        if (rowScales != nullptr) v *= rowScales[i / cols];
        if (colScales != nullptr) v *= colScales[c];
        const float b = bias != nullptr ? load_f(bias, biasDt, c) : 0.f;
        store_f(out, outDt, i, v + b);
    }
}
