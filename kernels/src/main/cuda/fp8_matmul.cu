// Products with FP8 weights (ProjectionOps.matmul with an Fp8Weight): w[n, k] is stored as E4M3 codes (OCP E4M3FN,
// torch.float8_e4m3fn) and a grid of fp32 scales, element (i, j) = decode(codes[i, j]) · scales[i / blockRows,
// j / blockCols], the product rounded once to fp32 as the CPU reference dequantises it. Two kernels:
// fp8_skinny_matmul for a few rows (decode), which reads each code once per 16 rows and dequantises in registers,
// and fp8_dequantize, which writes the dequantised weight into a bf16 scratch that cuBLAS then multiplies (prefill).
#include "common.cuh"

using namespace mstar;

constexpr int kFp8Threads = 256;
// Activation rows one block multiplies; more rows are more blocks over the same weight rows, launched side by side
// so that their second read of the codes hits L2.
constexpr int kFp8RowTile = 16;
// Codes a lane loads at once (one 16-byte load); k and blockCols are multiples of it.
constexpr int kFp8Chunk = 16;

// The value of an E4M3 code: exact in fp32. Exponent 0 is subnormal; S.1111.111 is NaN; no infinities.
__device__ __forceinline__ float e4m3_to_float(unsigned b) {
    const unsigned exponent = (b >> 3) & 0xFu, mantissa = b & 7u;
    float magnitude;
    if (exponent == 0xFu && mantissa == 7u) {
        magnitude = NAN;
    } else if (exponent == 0u) {
        magnitude = (float)mantissa * 0x1.0p-9f;
    } else {
        magnitude = __uint_as_float(((exponent + 120u) << 23) | (mantissa << 20));
    }
    return (b & 0x80u) ? -magnitude : magnitude;
}

// out[rows, n] = x[rows, k] · wᵀ + bias. blockIdx.x = column group · row tiles + row tile (row tiles innermost);
// warp w of a block owns weight row (output column) group · 8 + w for the rows of its tile: each lane dequantises 16
// codes at a time (one scale: blockCols is a multiple of 16) and accumulates them against every row of the tile in
// fp32, then a warp sum; the bias is added to the sum before its one rounding to out's dtype.
extern "C" __global__ void __launch_bounds__(kFp8Threads) fp8_skinny_matmul(
        const void* x, int xDt, const unsigned char* codes, const float* scales, int blockRows, int blockCols,
        const void* bias, int biasDt, void* out, int outDt, int rows, int n, int k) {
    await_previous_kernel();
    const int rowTiles = (rows + kFp8RowTile - 1) / kFp8RowTile;
    const int tile = blockIdx.x % rowTiles;
    const int col = blockIdx.x / rowTiles * (kFp8Threads / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (col >= n) {
        return;
    }
    const int firstRow = tile * kFp8RowTile;
    const int tileRows = rows - firstRow < kFp8RowTile ? rows - firstRow : kFp8RowTile;
    const int scaleCols = (k + blockCols - 1) / blockCols;
    const float* rowScales = scales + (long long)(col / blockRows) * scaleCols;
    const unsigned char* w = codes + (long long)col * k;
    float acc[kFp8RowTile];
    for (int r = 0; r < kFp8RowTile; r++) {
        acc[r] = 0.f;
    }
    for (int c = lane * kFp8Chunk; c < k; c += 32 * kFp8Chunk) {
        const uint4 packed = *reinterpret_cast<const uint4*>(w + c);
        const unsigned words[4] = {packed.x, packed.y, packed.z, packed.w};
        const float scale = rowScales[c / blockCols];
        float wv[kFp8Chunk];
        for (int j = 0; j < kFp8Chunk; j++) {
            wv[j] = e4m3_to_float((words[j / 4] >> (8 * (j % 4))) & 0xFFu) * scale;
        }
        for (int r = 0; r < kFp8RowTile; r++) {
            if (r < tileRows) {
                const long long xb = (long long)(firstRow + r) * k + c;
                float a = acc[r];
                for (int j = 0; j < kFp8Chunk; j++) {
                    a += load_f(x, xDt, xb + j) * wv[j];
                }
                acc[r] = a;
            }
        }
    }
    for (int r = 0; r < kFp8RowTile; r++) {
        acc[r] = warp_sum(acc[r]);
    }
    if (lane == 0) {
        const float b = bias == nullptr ? 0.f : load_f(bias, biasDt, col);
        for (int r = 0; r < tileRows; r++) {
            store_f(out, outDt, (long long)(firstRow + r) * n + col, acc[r] + b);
        }
    }
}

// out[n, k] (out's dtype) = the dequantised weight, each element rounded once from its fp32 value.
extern "C" __global__ void fp8_dequantize(const unsigned char* codes, const float* scales, int blockRows,
                                          int blockCols, void* out, int outDt, int n, int k) {
    await_previous_kernel();
    const int scaleCols = (k + blockCols - 1) / blockCols;
    MSTAR_GRID_LOOP(e, (long long)n * k) {
        const long long row = e / k;
        const int col = (int)(e - row * k);
        const float scale = scales[row / blockRows * scaleCols + col / blockCols];
        store_f(out, outDt, e, e4m3_to_float(codes[e]) * scale);
    }
}
