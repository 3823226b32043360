// Mamba2 mixer kernels (StateSpaceOps): the causal depthwise conv1d over xBC, the chunked state-space scan (SSD) of
// prefill chunks, the decode step of the state, and the gated RMSNorm. A batch is segments of tokens lying back to
// back (segment i is tokens [starts[i], starts[i+1]) of a request whose state is row slots[i]), read from device
// memory, so a recorded decode graph serves whatever slots a later step's rows hold. The input projection's row is
// [z (inner) | xBC (convDim) | dt (heads)]; xBC is [x (inner) | B (groups·N) | C (groups·N)]. Correctness first:
// plain fp32 loops, no tensor cores; their speed is not measured yet.
#include "common.cuh"

using namespace mstar;

// The widest convolution the conv kernel keeps in registers (Mamba2 checkpoints use 4).
constexpr int kMaxConvKernel = 8;
// Tokens of one chunk of the scan kernel. Any chunk length gives the same result in exact arithmetic, so this need not
// be the checkpoint's chunk_size; 16 keeps a chunk's x, B and C in static shared memory at the largest shapes below.
constexpr int kSsdChunk = 16;
constexpr int kSsdMaxHeadDim = 128;
constexpr int kSsdMaxState = 256;
constexpr int kSsdThreads = 256;

__device__ __forceinline__ float silu_f(float v) { return v / (1.f + expf(-v)); }

// torch's softplus (threshold 20) then clamp to the time step limits.
__device__ __forceinline__ float step_size(float raw, float bias, float dtMin, float dtMax) {
    const float v = raw + bias;
    const float sp = v > 20.f ? v : log1pf(expf(v));
    return fminf(fmaxf(sp, dtMin), dtMax);
}

// One thread per (segment, channel): the window (the channel's last k - 1 inputs, oldest first) comes from the
// state, slides over the segment's tokens, and goes back to the state.
extern "C" __global__ void mamba_causal_conv1d(const void* proj, int projDt, const void* weight, int wDt,
                                               const void* bias, int biasDt, void* states, int stDt, const int* slots,
                                               const int* starts, void* xbc, int outDt, int segments, int convDim,
                                               int k, int width, int xbcCol) {
    await_previous_kernel();
    MSTAR_GRID_LOOP(e, (long long)segments * convDim) {
        const int seg = (int)(e / convDim);
        const int c = (int)(e - (long long)seg * convDim);
        const long long stateBase = ((long long)slots[seg] * convDim + c) * (k - 1);
        float w[kMaxConvKernel], win[kMaxConvKernel];
        for (int j = 0; j < k; j++) w[j] = load_f(weight, wDt, (long long)c * k + j);
        for (int j = 0; j < k - 1; j++) win[j] = load_f(states, stDt, stateBase + j);
        const float b = bias == nullptr ? 0.f : load_f(bias, biasDt, c);
        for (int t = starts[seg]; t < starts[seg + 1]; t++) {
            const float in = load_f(proj, projDt, (long long)t * width + xbcCol + c);
            float acc = b;
            for (int j = 0; j < k - 1; j++) acc += w[j] * win[j];
            acc += w[k - 1] * in;
            store_f(xbc, outDt, (long long)t * convDim + c, silu_f(acc));
            for (int j = 0; j < k - 2; j++) win[j] = win[j + 1];
            win[k - 2] = in;
        }
        for (int j = 0; j < k - 1; j++) store_f(states, stDt, stateBase + j, win[j]);
    }
}

// One block per (segment, head), chunk by chunk. With cum the inclusive prefix sum of dt·A over the chunk and h0 the
// state before it:
//   y_t = exp(cum_t)·(C_t·h0) + Σ_{s≤t} (C_t·B_s)·exp(cum_t − cum_s)·dt_s·x_s + D·x_t
//   h   = exp(cum_last)·h0 + Σ_s exp(cum_last − cum_s)·dt_s·x_s ⊗ B_s
// The state stays in the slot (global memory): read by the outputs, then updated once every output has read it.
extern "C" __global__ void __launch_bounds__(kSsdThreads) mamba_ssd_scan(
    const void* xbc, int xDt, const void* proj, int projDt, const void* aLog, int aDt, const void* dtBias, int dtbDt,
    const void* dSkip, int dDt, void* states, int stDt, const int* slots, const int* starts, void* y, int yDt,
    int heads, int headDim, int groups, int stateDim, float dtMin, float dtMax) {
    __shared__ float xs[kSsdChunk * kSsdMaxHeadDim];
    __shared__ float bs[kSsdChunk * kSsdMaxState];
    __shared__ float cs[kSsdChunk * kSsdMaxState];
    __shared__ float cb[kSsdChunk * kSsdChunk];
    __shared__ float dts[kSsdChunk], cum[kSsdChunk];
    await_previous_kernel();
    const int seg = blockIdx.x / heads, head = blockIdx.x - seg * heads;
    const int inner = heads * headDim, groupStates = groups * stateDim, convDim = inner + 2 * groupStates;
    const int width = inner + convDim + heads;
    const int bCol = inner + head / (heads / groups) * stateDim, cCol = bCol + groupStates;
    const float a = -expf(load_f(aLog, aDt, head));
    const float bias = load_f(dtBias, dtbDt, head), skip = load_f(dSkip, dDt, head);
    const long long stateBase = ((long long)slots[seg] * heads + head) * headDim * stateDim;
    const int first = starts[seg], end = starts[seg + 1];
    for (int t0 = first; t0 < end; t0 += kSsdChunk) {
        const int len = min(kSsdChunk, end - t0);
        if (threadIdx.x < len) {
            dts[threadIdx.x] = step_size(load_f(proj, projDt, (long long)(t0 + threadIdx.x) * width + inner + convDim
                                                + head), bias, dtMin, dtMax);
        }
        for (int i = threadIdx.x; i < len * headDim; i += blockDim.x) {
            const int s = i / headDim, p = i - s * headDim;
            xs[i] = load_f(xbc, xDt, (long long)(t0 + s) * convDim + head * headDim + p);
        }
        for (int i = threadIdx.x; i < len * stateDim; i += blockDim.x) {
            const int s = i / stateDim, n = i - s * stateDim;
            bs[i] = load_f(xbc, xDt, (long long)(t0 + s) * convDim + bCol + n);
            cs[i] = load_f(xbc, xDt, (long long)(t0 + s) * convDim + cCol + n);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            float sum = 0.f;
            for (int s = 0; s < len; s++) cum[s] = sum += a * dts[s];
        }
        for (int i = threadIdx.x; i < len * len; i += blockDim.x) {
            const int t = i / len, s = i - t * len;
            float acc = 0.f;
            if (s <= t) {
                for (int n = 0; n < stateDim; n++) acc += cs[t * stateDim + n] * bs[s * stateDim + n];
            }
            cb[t * kSsdChunk + s] = acc;
        }
        __syncthreads();
        for (int i = threadIdx.x; i < len * headDim; i += blockDim.x) {
            const int t = i / headDim, p = i - t * headDim;
            float carried = 0.f;
            for (int n = 0; n < stateDim; n++) {
                carried += cs[t * stateDim + n] * load_f(states, stDt, stateBase + (long long)p * stateDim + n);
            }
            float acc = expf(cum[t]) * carried;
            for (int s = 0; s <= t; s++) {
                acc += cb[t * kSsdChunk + s] * expf(cum[t] - cum[s]) * dts[s] * xs[s * headDim + p];
            }
            acc += skip * xs[t * headDim + p];
            store_f(y, yDt, (long long)(t0 + t) * inner + head * headDim + p, acc);
        }
        __syncthreads();
        const float last = cum[len - 1], decay = expf(last);
        for (int i = threadIdx.x; i < headDim * stateDim; i += blockDim.x) {
            const int p = i / stateDim, n = i - p * stateDim;
            float h = decay * load_f(states, stDt, stateBase + i);
            for (int s = 0; s < len; s++) {
                h += expf(last - cum[s]) * dts[s] * xs[s * headDim + p] * bs[s * stateDim + n];
            }
            store_f(states, stDt, stateBase + i, h);
        }
        __syncthreads();
    }
}

// The decode step: one thread per (row, head, channel), looping over the state of its channel:
// h = h·exp(dt·A) + dt·B·x, y = h·C + D·x.
extern "C" __global__ void mamba_ssm_step(const void* xbc, int xDt, const void* proj, int projDt, const void* aLog,
                                          int aDt, const void* dtBias, int dtbDt, const void* dSkip, int dDt,
                                          void* states, int stDt, const int* slots, void* y, int yDt, int rows,
                                          int heads, int headDim, int groups, int stateDim, float dtMin, float dtMax) {
    await_previous_kernel();
    const int inner = heads * headDim, groupStates = groups * stateDim, convDim = inner + 2 * groupStates;
    const int width = inner + convDim + heads;
    MSTAR_GRID_LOOP(e, (long long)rows * inner) {
        const int row = (int)(e / inner);
        const int channel = (int)(e - (long long)row * inner);
        const int head = channel / headDim, p = channel - head * headDim;
        const float dt = step_size(load_f(proj, projDt, (long long)row * width + inner + convDim + head),
                                   load_f(dtBias, dtbDt, head), dtMin, dtMax);
        const float decay = expf(dt * -expf(load_f(aLog, aDt, head)));
        const long long xBase = (long long)row * convDim;
        const long long bBase = xBase + inner + head / (heads / groups) * stateDim, cBase = bBase + groupStates;
        const float x = load_f(xbc, xDt, xBase + channel);
        const long long stateBase = (((long long)slots[row] * heads + head) * headDim + p) * stateDim;
        float acc = 0.f;
        for (int n = 0; n < stateDim; n++) {
            const float h = load_f(states, stDt, stateBase + n) * decay + dt * load_f(xbc, xDt, bBase + n) * x;
            store_f(states, stDt, stateBase + n, h);
            acc += h * load_f(xbc, xDt, cBase + n);
        }
        store_f(y, yDt, e, acc + load_f(dSkip, dDt, head) * x);
    }
}

// One block per (row, group): v = y·silu(z) over the group's columns, normalised by its root mean square, times the
// weight. Two passes over the row (sum of squares, then the store), so out may be y.
extern "C" __global__ void mamba_gated_rms_norm(const void* y, int yDt, const void* gate, int gDt, const void* weight,
                                                int wDt, void* out, int outDt, int inner, int gateWidth, int groups,
                                                float eps) {
    __shared__ float scratch[32];
    await_previous_kernel();
    const int row = blockIdx.x / groups, group = blockIdx.x - row * groups, size = inner / groups;
    const long long yBase = (long long)row * inner + group * size, gBase = (long long)row * gateWidth + group * size;
    float ss = 0.f;
    for (int i = threadIdx.x; i < size; i += blockDim.x) {
        const float v = load_f(y, yDt, yBase + i) * silu_f(load_f(gate, gDt, gBase + i));
        ss += v * v;
    }
    ss = block_sum(ss, scratch);
    const float inv = (float)(1.0 / sqrt((double)(ss / (float)size + eps)));
    for (int i = threadIdx.x; i < size; i += blockDim.x) {
        const float v = load_f(y, yDt, yBase + i) * silu_f(load_f(gate, gDt, gBase + i));
        store_f(out, outDt, yBase + i, v * inv * load_f(weight, wDt, group * size + i));
    }
}
