// Elementwise and row-gather ops: embedding, add, SiLU·mul, dtype conversion, bias add.
#include "common.cuh"

using namespace mstar;

// out[i, :] = table[ids[i], :]. An id outside the vocabulary yields a NaN row (no exceptions on a GPU;
// NaN makes the bad row visible downstream instead of silently reading another token).
extern "C" __global__ void embedding_gather(const void* table, int tableDt, const int* ids, void* out, int outDt,
                                            long long n, int hidden, int vocab) {
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
    MSTAR_GRID_LOOP(i, n) { store_f(out, outDt, i, load_f(a, aDt, i) + load_f(b, bDt, i)); }
}

// out[r, i] = silu(gateUp[r, i]) * gateUp[r, inter + i].
extern "C" __global__ void silu_mul(const void* gateUp, int inDt, void* out, int outDt, long long rows, int inter) {
    MSTAR_GRID_LOOP(i, rows * inter) {
        const long long r = i / inter;
        const long long c = i - r * inter;
        const float g = load_f(gateUp, inDt, r * 2 * inter + c);
        const float u = load_f(gateUp, inDt, r * 2 * inter + inter + c);
        store_f(out, outDt, i, g / (1.f + expf(-g)) * u);
    }
}

extern "C" __global__ void convert_elements(const void* in, int inDt, void* out, int outDt, long long n) {
    MSTAR_GRID_LOOP(i, n) { store_f(out, outDt, i, load_f(in, inDt, i)); }
}

// out[r, c] = acc[r, c] + bias[c], rounding once: the GEMM accumulated into fp32 scratch first.
extern "C" __global__ void bias_add_cast(const float* acc, const void* bias, int biasDt, void* out, int outDt,
                                         long long rows, int cols) {
    MSTAR_GRID_LOOP(i, rows * cols) {
        const int c = (int)(i % cols);
        const float b = bias != nullptr ? load_f(bias, biasDt, c) : 0.f;
        store_f(out, outDt, i, acc[i] + b);
    }
}
