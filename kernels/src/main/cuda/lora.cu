// Batched LoRA (ProjectionOps.addLora): each row of a projection's output gains its own adapter's low-rank update,
// out[i, outCol + j] += scales[s] · Σ_r t[i, r] · b[s, j, r] with t[i, r] = Σ_c x[i, c] · a[s, r, c] and
// s = slots[i] (a negative slot: no update). Two kernels: lora_shrink writes t (fp32 [rows, rank]), lora_expand adds
// it into out. The slot of each row is read from device memory, never from launch arguments, so a recorded decode
// graph serves whatever adapters the rows of a later step use. Correctness first: one block per row in the shrink,
// one thread per output element in the expand; the rank is the stack's (adapters of a lower rank are zero-padded)
// and has no bound of the kernels' own.
#include "common.cuh"

using namespace mstar;

constexpr int kLoraShrinkThreads = 256;

// t[i, r] for every rank r of row i's slot: blockIdx.x = i; warp w sums ranks w, w + warps, ... over the K inputs,
// lanes striding the inputs, then a warp sum. Rows without an adapter leave t untouched (the expand skips them too).
extern "C" __global__ void __launch_bounds__(kLoraShrinkThreads) lora_shrink(const void* x, int xDt, const void* a,
                                                                           int aDt, const int* slots, float* t,
                                                                           int stack, int rank, int k) {
    await_previous_kernel();
    const int row = blockIdx.x;
    const int s = slots[row];
    if (s < 0 || s >= stack) {
        return;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const long long xBase = (long long)row * k;
    for (int r = warp; r < rank; r += warps) {
        const long long aBase = ((long long)s * rank + r) * k;
        float acc = 0.f;
        for (int c = lane; c < k; c += 32) {
            acc += load_f(x, xDt, xBase + c) * load_f(a, aDt, aBase + c);
        }
        acc = warp_sum(acc);
        if (lane == 0) {
            t[(long long)row * rank + r] = acc;
        }
    }
}

// out[i, outCol + j] += scales[s] · Σ_r t[i, r] · b[s, j, r], one thread per (i, j) of n outputs per row; a row
// whose slot lies outside the stack gets NaN, so a bad slot shows downstream instead of reading another adapter.
extern "C" __global__ void lora_expand(const float* t, const void* b, int bDt, const float* scales, const int* slots,
                                       void* out, int outDt, long long rows, int n, int rank, int width, int outCol,
                                       int stack) {
    await_previous_kernel();
    MSTAR_GRID_LOOP(e, rows * n) {
        const long long row = e / n;
        const int j = (int)(e - row * n);
        const int s = slots[row];
        if (s < 0) {
            continue;
        }
        const long long o = row * width + outCol + j;
        if (s >= stack) {
            store_f(out, outDt, o, NAN);
            continue;
        }
        const long long bBase = ((long long)s * n + j) * rank;
        float acc = 0.f;
        for (int r = 0; r < rank; r++) {
            acc += t[row * rank + r] * load_f(b, bDt, bBase + r);
        }
        store_f(out, outDt, o, load_f(out, outDt, o) + scales[s] * acc);
    }
}
