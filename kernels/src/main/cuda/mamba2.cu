// Mamba2 mixer kernels (StateSpaceOps): the causal depthwise conv1d over xBC, the chunked state-space scan (SSD) of
// prefill chunks, the decode step of the state, and the gated RMSNorm. A batch is segments of tokens lying back to
// back (segment i is tokens [starts[i], starts[i+1]) of a request whose state is row slots[i]), read from device
// memory, so a recorded decode graph serves whatever slots a later step's rows hold. The input projection's row is
// [z (inner) | xBC (convDim) | dt (heads)]; xBC is [x (inner) | B (groups·N) | C (groups·N)]. The scan cuts
// segments into pieces scanned in parallel, each keeping its channels' state in mma accumulators across its chunks
// and doing a chunk's products on the tensor cores, in TF32 halves that carry fp32 accuracy; the decode step reads and
// writes each state row once, coalesced, in fp32 on the CUDA cores.
#include "common.cuh"
#include "mma.cuh"
#include "vec8.cuh"

using namespace mstar;

// The widest convolution the conv kernel keeps in registers (Mamba2 checkpoints use 4).
constexpr int kMaxConvKernel = 8;
// The conv block: kConvThreads threads, channels by runs of a segment's tokens (kConvRuns runs for prefill, one when
// every segment is a decode row), each thread one channel over one run.
constexpr int kConvThreads = 256;
constexpr int kConvRuns = 8;
constexpr int kConvTokens = 8;  // a run's inputs a thread reads at once
// The scan block: kSsdChannels channels of a head by the state's NMAX values, a warp holding 16 channels by
// kSsdWarpStates values (ssd_threads(NMAX) threads). The largest state (CudaStateSpace.MAX_STATE) and the chunk's B
// and C share memory: a chunk is 4096 / NMAX tokens, at most kSsdMaxChunk. Any chunk length gives the same result in
// exact arithmetic, so this need not be the checkpoint's chunk_size.
constexpr int kSsdChannels = 64;
constexpr int kSsdWarpStates = 64;
constexpr int kSsdMaxChunk = 32;
__host__ __device__ constexpr int ssd_threads(int nmax) {
    return 32 * (kSsdChannels / 16) * (nmax / kSsdWarpStates);
}
// Row strides in shared memory that put the fragment loads of one mma on 32 different banks: B and C rows NMAX + 8,
// x rows kSsdXsStride, W rows L + 4, the outputs' partial sums kSsdYsStride.
constexpr int kSsdXsStride = kSsdChannels + 8;
constexpr int kSsdYsStride = kSsdChannels + 4;
// The decode step's block, one per (row, head): kStepWarps warps over the head's channels.
constexpr int kStepThreads = 256;
constexpr int kStepWarps = kStepThreads / 32;
// The gated norm's block, one per (row, group): a group is thousands of values (8192 in Bamba-9B) and a decode
// batch has few (row, group) pairs, so the block is the largest CUDA allows.
constexpr int kNormThreads = 1024;

__device__ __forceinline__ float silu_f(float v) { return v / (1.f + expf(-v)); }

// torch's softplus (threshold 20) then clamp to the time step limits.
__device__ __forceinline__ float step_size(float raw, float bias, float dtMin, float dtMax) {
    const float v = raw + bias;
    const float sp = v > 20.f ? v : log1pf(expf(v));
    return fminf(fmaxf(sp, dtMin), dtMax);
}

// Block (segment, kConvThreads / runs channels) = blockIdx.x, thread (run g, channel c): run g of the segment's tokens
// cut in `runs`. A run's window (the channel's k - 1 inputs before its first token, oldest first) comes from the
// projection or, before the segment, from the state; after every run has read it, run 0 writes the segment's last
// k - 1 inputs back to the state. The weights and the window are registers (every index into them is unrolled up to
// kMaxConvKernel, masked by k), and a run's inputs are read kConvTokens at a time, all in flight before the first
// output, so a thread is not one memory round trip a token.
extern "C" __global__ void __launch_bounds__(kConvThreads) mamba_causal_conv1d(
        const void* proj, int projDt, const void* weight, int wDt, const void* bias, int biasDt, void* states,
        int stDt, const int* slots, const int* starts, void* xbc, int outDt, int segments, int convDim, int k,
        int width, int xbcCol, int runs) {
    await_previous_kernel();
    const int channels = blockDim.x / runs;
    const int tiles = (convDim + channels - 1) / channels;
    const int seg = blockIdx.x / tiles;
    const int c = (blockIdx.x - seg * tiles) * channels + threadIdx.x % channels;
    const int g = threadIdx.x / channels;
    const bool active = c < convDim;
    const int start = starts[seg], end = starts[seg + 1], len = end - start;
    const int run = (len + runs - 1) / runs;
    const int first = start + min(len, g * run), last = start + min(len, (g + 1) * run);
    const long long stateBase = ((long long)slots[seg] * convDim + c) * (k - 1);
    float w[kMaxConvKernel], win[kMaxConvKernel], old[kMaxConvKernel];
    float b = 0.f;
    if (active) {
#pragma unroll
        for (int j = 0; j < kMaxConvKernel; j++) w[j] = j < k ? load_f(weight, wDt, (long long)c * k + j) : 0.f;
        b = bias == nullptr ? 0.f : load_f(bias, biasDt, c);
#pragma unroll
        for (int j = 0; j < kMaxConvKernel - 1; j++) {
            const int u = first - (k - 1) + j;
            win[j] = j >= k - 1 ? 0.f
                     : u >= start ? load_f(proj, projDt, (long long)u * width + xbcCol + c)
                                  : load_f(states, stDt, stateBase + (u - start) + (k - 1));
            old[j] = win[j];
        }
    }
    __syncthreads();  // every run has read the state before run 0 rewrites it
    if (!active) return;
    for (int t0 = first; t0 < last; t0 += kConvTokens) {
        float in[kConvTokens];
#pragma unroll
        for (int i = 0; i < kConvTokens; i++) {
            in[i] = t0 + i < last ? load_f(proj, projDt, (long long)(t0 + i) * width + xbcCol + c) : 0.f;
        }
#pragma unroll
        for (int i = 0; i < kConvTokens; i++) {
            if (t0 + i >= last) break;
            float acc = b;
#pragma unroll
            for (int j = 0; j < kMaxConvKernel - 1; j++) acc += w[j] * win[j];  // the window is zero past k - 2
#pragma unroll
            for (int j = 0; j < kMaxConvKernel; j++) {
                if (j == k - 1) acc += w[j] * in[i];
            }
            store_f(xbc, outDt, (long long)(t0 + i) * convDim + c, silu_f(acc));
#pragma unroll
            for (int j = 0; j < kMaxConvKernel - 1; j++) win[j] = j < k - 2 ? win[j + 1] : j == k - 2 ? in[i] : 0.f;
        }
    }
    if (g == 0) {
        // the new window: the segment's last k - 1 inputs, the older ones from the old window when it is short
        for (int j = 0; j < k - 1; j++) {
            const int u = end - (k - 1) + j;
            store_f(states, stDt, stateBase + j, u >= start ? load_f(proj, projDt, (long long)u * width + xbcCol + c)
                                                            : old[len + j]);
        }
    }
}

// Chunked SSD scan over pieces. A segment's tokens are cut into pieces of kSsdPieceTokens, each scanned by its own
// blocks from the state entering it, so a long prompt fills the GPU instead of one block a head walking every chunk in
// turn: mamba_ssd_pieces lays out the pieces, mamba_ssd_piece_state scans every piece but a segment's last from a zero
// state (the state it adds, and its decay), mamba_ssd_pass chains those into each piece's entering state, and
// mamba_ssd_scan scans each piece from its entering state, writing the outputs and, at the segment's last piece, the
// state. When no segment is longer than a piece only mamba_ssd_pieces and mamba_ssd_scan run.
//
// Within a piece, block (piece, head, channel tile): channels p0 .. p0 + 63 of the head, the state h of those
// channels (64 x NMAX) held in the warps' mma accumulators. Per chunk of L tokens, with cum the inclusive prefix sum
// of dt·A over the chunk and h the state before:
//   y_t = exp(cum_t)·(C_t·h) + Σ_{s≤t} W[t][s]·x_s + D·x_t,   W[t][s] = (C_t·B_s)·exp(cum_t − cum_s)·dt_s
//   h  ← exp(cum_L)·h + Σ_s exp(cum_L − cum_s)·dt_s·x_s·B_s
// Each is a matrix product: C·Bᵀ (L x L over the state), h·Cᵀ (channels x L over the state; each warp's share over
// its state values, summed across warps), Xᵀ·Wᵀ (channels x L over the chunk) and (tail·X)ᵀ·B (the state's update
// over the chunk).
constexpr int kSsdPieceTokens = 256;

// The piece table, ints: [0] pieces, [1] segments of more than one piece ("multi"), [2] their pieces (each has a
// slot of the entering-state workspace), [3] those pieces that are not their segment's last; then arrays of
// `cap` ints: per piece its segment, first token and workspace slot (−1 for a segment's only piece); per slot its
// piece; per multi segment its segment, first slot and piece count; per non-last piece its slot.
template <class I>  // int where the table is written, const int where it is read
struct SsdPieces {
    I* head;
    I *pieceSeg, *pieceStart, *pieceSlot, *slotPiece, *multiSeg, *multiSlot, *multiCount, *innerSlot;
    __device__ SsdPieces(I* table, int cap)
        : head(table), pieceSeg(table + 4), pieceStart(pieceSeg + cap), pieceSlot(pieceStart + cap),
          slotPiece(pieceSlot + cap), multiSeg(slotPiece + cap), multiSlot(multiSeg + cap),
          multiCount(multiSlot + cap), innerSlot(multiCount + cap) {}
};

// One warp: segments 32 at a time, each lane one segment, offsets by warp prefix sums.
extern "C" __global__ void mamba_ssd_pieces(const int* starts, int segments, int cap, int* table) {
    await_previous_kernel();
    const SsdPieces<int> t(table, cap);
    const int lane = threadIdx.x;
    int pieces = 0, multis = 0, slots = 0, inners = 0;
    for (int s0 = 0; s0 < segments; s0 += 32) {
        const int seg = s0 + lane;
        const int len = seg < segments ? starts[seg + 1] - starts[seg] : 0;
        const int count = (len + kSsdPieceTokens - 1) / kSsdPieceTokens;
        const int multi = count > 1, mySlots = multi ? count : 0, myInner = multi ? count - 1 : 0;
        int pc = count, mc = multi, sc = mySlots, ic = myInner;  // inclusive prefix sums over the lanes
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int a = __shfl_up_sync(0xffffffffu, pc, o), b = __shfl_up_sync(0xffffffffu, mc, o);
            const int c = __shfl_up_sync(0xffffffffu, sc, o), d = __shfl_up_sync(0xffffffffu, ic, o);
            if (lane >= o) {
                pc += a;
                mc += b;
                sc += c;
                ic += d;
            }
        }
        const int piece0 = pieces + pc - count, slot0 = slots + sc - mySlots, inner0 = inners + ic - myInner;
        for (int i = 0; i < count; i++) {
            t.pieceSeg[piece0 + i] = seg;
            t.pieceStart[piece0 + i] = starts[seg] + i * kSsdPieceTokens;
            t.pieceSlot[piece0 + i] = multi ? slot0 + i : -1;
            if (multi) t.slotPiece[slot0 + i] = piece0 + i;
            if (i < myInner) t.innerSlot[inner0 + i] = slot0 + i;
        }
        if (multi) {
            const int m = multis + mc - 1;
            t.multiSeg[m] = seg;
            t.multiSlot[m] = slot0;
            t.multiCount[m] = count;
        }
        pieces += __shfl_sync(0xffffffffu, pc, 31);
        multis += __shfl_sync(0xffffffffu, mc, 31);
        slots += __shfl_sync(0xffffffffu, sc, 31);
        inners += __shfl_sync(0xffffffffu, ic, 31);
    }
    if (lane == 0) {
        t.head[0] = pieces;
        t.head[1] = multis;
        t.head[2] = slots;
        t.head[3] = inners;
    }
}

// c += a·b on the tensor cores to about fp32 accuracy: a in TF32 halves (hi, lo), b as floats split the same way;
// hi·hi + hi·lo + lo·hi, the small terms first. An exact operand (a value of a 16-bit type is exactly a TF32) has no
// lo term.
__device__ __forceinline__ void mma_tf32x3(float (&c)[4], const uint32_t (&aHi)[4], const uint32_t (&aLo)[4],
                                           bool aExact, float b0, float b1, bool bExact) {
    const uint32_t h0 = to_tf32(b0), h1 = to_tf32(b1);
    if (!bExact) mma_tf32(c, aHi, to_tf32(b0 - __uint_as_float(h0)), to_tf32(b1 - __uint_as_float(h1)));
    if (!aExact) mma_tf32(c, aLo, h0, h1);
    mma_tf32(c, aHi, h0, h1);
}

__device__ __forceinline__ void split_tf32(const float (&v)[4], uint32_t (&hi)[4], uint32_t (&lo)[4]) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        hi[i] = to_tf32(v[i]);
        lo[i] = to_tf32(v[i] - __uint_as_float(hi[i]));
    }
}

// The fragment coordinates of a scan thread: warp (wp, wn) holds channels 16·wp + g and + 8 of the tile and state
// values 64·wn + 8j + 2q and + 1 (h[j][e]: channel row g + 8·(e / 2), value 2q + e % 2 of n-tile j).
struct SsdLane {
    int wn, g, q, row, n0;
    __device__ SsdLane() {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        wn = warp / (kSsdChannels / 16);
        g = lane / 4;
        q = lane % 4;
        row = 16 * (warp % (kSsdChannels / 16)) + g;
        n0 = kSsdWarpStates * wn + 2 * q;
    }
};

// Stages ROWS rows of COLS values (a chunk's B, C or x) into shared rows of `stride` floats: row s from tensor row
// row0 + s of rowLen values at column col0, zeros past `len` rows and `valid` values. Where the rows allow, bf16 and
// fp32 values come 8 at a time (16 or 32 bytes) with all of a thread's loads in flight before its first store: a
// chunk then costs a few L2 round trips, not one per value.
template <int ROWS, int COLS, int THREADS>
__device__ __forceinline__ void ssd_stage(float* dst, int stride, const void* src, int dt, long long row0, int rowLen,
                                          int col0, int len, int valid) {
    const bool vectors = (dt == DT_BF16 || dt == DT_F32) && rowLen % 8 == 0 && col0 % 8 == 0 && valid % 8 == 0
                         && reinterpret_cast<uintptr_t>(src) % 16 == 0;
    if (vectors) {
        constexpr int V = COLS / 8, TOTAL = ROWS * V, PER = (TOTAL + THREADS - 1) / THREADS;
        float a[PER][8];
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const int v = threadIdx.x + i * THREADS, s = v / V, c = (v - s * V) * 8;
            if (v < TOTAL && s < len && c < valid) {
                const long long e8 = ((row0 + s) * rowLen + col0 + c) / 8;
                if (dt == DT_BF16) load8(static_cast<const __nv_bfloat16*>(src), e8, a[i]);
                else load8(static_cast<const float*>(src), e8, a[i]);
            } else {
#pragma unroll
                for (int j = 0; j < 8; j++) a[i][j] = 0.f;
            }
        }
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const int v = threadIdx.x + i * THREADS, s = v / V, c = (v - s * V) * 8;
            if (v < TOTAL) {
                float4* d = reinterpret_cast<float4*>(dst + s * stride + c);
                d[0] = make_float4(a[i][0], a[i][1], a[i][2], a[i][3]);
                d[1] = make_float4(a[i][4], a[i][5], a[i][6], a[i][7]);
            }
        }
    } else {
        for (int i = threadIdx.x; i < ROWS * COLS; i += THREADS) {
            const int s = i / COLS, c = i - s * COLS;
            dst[s * stride + c] = s < len && c < valid ? load_f(src, dt, (row0 + s) * rowLen + col0 + c) : 0.f;
        }
    }
}

// Scans tokens [first, end) of one head's channel tile from the state h in the mma accumulators, chunk by chunk; with
// OUTPUTS it writes y, without it only advances h and multiplies `decay` by each chunk's exp(cum_L). `exact`: the
// xBC values are of a 16-bit type.
template <int NMAX, bool OUTPUTS>
__device__ __forceinline__ void ssd_chunks(
    const void* xbc, int xDt, const void* proj, int projDt, float a, float bias, float skip, void* y, int yDt,
    int head, int p0, int heads, int headDim, int groups, int stateDim, float dtMin, float dtMax, int first, int end,
    float (&h)[8][4], float& decayProduct) {
    constexpr int L = 4096 / NMAX < kSsdMaxChunk ? 4096 / NMAX : kSsdMaxChunk;
    constexpr int SB = NMAX + 8, SW = L + 4, TT = L / 8, WN = NMAX / kSsdWarpStates, THREADS = ssd_threads(NMAX);
    static_assert(WN * L * kSsdYsStride <= 2 * L * SB, "the outputs' partial sums fit where B and C were");
    __shared__ __align__(16) float bc[(OUTPUTS ? 2 : 1) * L * SB];  // B rows, then C rows; then the partial outputs
    __shared__ __align__(16) float xs[L * kSsdXsStride];
    __shared__ float w[OUTPUTS ? L * SW : 1];  // W[t][s]
    __shared__ float dts[L], cum[L], tail[L];  // tail[s] = exp(cum_L − cum_s)·dt_s
    float* bs = bc;
    float* cs = bc + L * SB;
    const SsdLane ln;
    const bool exact = xDt != DT_F32;
    const int N = stateDim;
    const int inner = heads * headDim, groupStates = groups * stateDim, convDim = inner + 2 * groupStates;
    const int width = inner + convDim + heads;
    const int bCol = inner + head / (heads / groups) * stateDim, cCol = bCol + groupStates;
    for (int t0 = first; t0 < end; t0 += L) {
        // rows past the chunk's end (and values past the state) are zeros, with dt 0: they add nothing
        const int len = min(L, end - t0);
        if (threadIdx.x < L) {
            dts[threadIdx.x] = threadIdx.x < len ? step_size(load_f(proj, projDt, (long long)(t0 + threadIdx.x) * width
                                                                    + inner + convDim + head), bias, dtMin, dtMax)
                                                 : 0.f;
        }
        ssd_stage<L, NMAX, THREADS>(bs, SB, xbc, xDt, t0, convDim, bCol, len, N);
        if (OUTPUTS) ssd_stage<L, NMAX, THREADS>(cs, SB, xbc, xDt, t0, convDim, cCol, len, N);
        ssd_stage<L, kSsdChannels, THREADS>(xs, kSsdXsStride, xbc, xDt, t0, convDim, head * headDim + p0, len,
                                            min(kSsdChannels, headDim - p0));
        __syncthreads();
        if (threadIdx.x < 32) {  // cum by a warp's prefix sum; past len it stays cum_L
            const int s = threadIdx.x;
            float v = s < L ? a * dts[s] : 0.f;
#pragma unroll
            for (int o = 1; o < 32; o *= 2) {
                const float u = __shfl_up_sync(0xffffffffu, v, o);
                if (s >= o) v += u;
            }
            const float total = __shfl_sync(0xffffffffu, v, L - 1);
            if (s < L) {
                cum[s] = v;
                tail[s] = expf(total - v) * dts[s];
            }
        }
        __syncthreads();
        float acc[TT][4];
        if (OUTPUTS) {
            // W: tiles of 16 t by 8 s, those above the diagonal zero; A = C rows, B = Bᵀ, the state values of a k-step
            // taken in pairs (slot q ↔ value 2q, slot q + 4 ↔ 2q + 1) so each operand pair is one 8-byte load
            for (int tile = threadIdx.x / 32; tile < L / 16 * TT; tile += blockDim.x / 32) {
                const int t = tile / TT * 16 + ln.g, s = tile % TT * 8 + 2 * ln.q;
                float c[4] = {0.f, 0.f, 0.f, 0.f};
                if (tile % TT * 8 <= tile / TT * 16 + 15) {
                    for (int k = 0; k < NMAX; k += 8) {
                        const float2 c0 = *reinterpret_cast<const float2*>(cs + t * SB + k + 2 * ln.q);
                        const float2 c1 = *reinterpret_cast<const float2*>(cs + (t + 8) * SB + k + 2 * ln.q);
                        const float2 b = *reinterpret_cast<const float2*>(bs + (tile % TT * 8 + ln.g) * SB + k
                                                                          + 2 * ln.q);
                        uint32_t hi[4], lo[4];
                        split_tf32({c0.x, c1.x, c0.y, c1.y}, hi, lo);
                        mma_tf32x3(c, hi, lo, exact, b.x, b.y, exact);
                    }
                }
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int te = t + 8 * (e / 2), se = s + e % 2;
                    w[te * SW + se] = se <= te ? c[e] * expf(cum[te] - cum[se]) * dts[se] : 0.f;
                }
            }
            __syncthreads();
            // Yᵀ = exp(cum_t)·h·Cᵀ + Xᵀ·Wᵀ: h's accumulator read as A with the same pairing of state values
#pragma unroll
            for (int tt = 0; tt < TT; tt++) {
#pragma unroll
                for (int e = 0; e < 4; e++) acc[tt][e] = 0.f;
            }
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint32_t hi[4], lo[4];
                split_tf32({h[j][0], h[j][2], h[j][1], h[j][3]}, hi, lo);
#pragma unroll
                for (int tt = 0; tt < TT; tt++) {
                    const float2 c = *reinterpret_cast<const float2*>(cs + (8 * tt + ln.g) * SB + ln.n0 + 8 * j);
                    mma_tf32x3(acc[tt], hi, lo, false, c.x, c.y, exact);
                }
            }
#pragma unroll
            for (int tt = 0; tt < TT; tt++) {
                const float e0 = expf(cum[8 * tt + 2 * ln.q]), e1 = expf(cum[8 * tt + 2 * ln.q + 1]);
                acc[tt][0] *= e0;
                acc[tt][1] *= e1;
                acc[tt][2] *= e0;
                acc[tt][3] *= e1;
            }
            if (ln.wn == 0) {  // the chunk's own tokens, once per channel
#pragma unroll
                for (int k = 0; k < L; k += 8) {
                    const float* x0 = xs + (k + ln.q) * kSsdXsStride + ln.row;
                    const float* x1 = x0 + 4 * kSsdXsStride;
                    uint32_t hi[4], lo[4];
                    split_tf32({x0[0], x0[8], x1[0], x1[8]}, hi, lo);
#pragma unroll
                    for (int tt = 0; tt < TT; tt++) {
                        const float* wt = w + (8 * tt + ln.g) * SW + k + ln.q;
                        mma_tf32x3(acc[tt], hi, lo, exact, wt[0], wt[4], false);
                    }
                }
            }
        }
        // the state: h ← exp(cum_L)·h + (tail·X)ᵀ·B
        const float decay = expf(cum[L - 1]);
        decayProduct *= decay;
#pragma unroll
        for (int j = 0; j < 8; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) h[j][e] *= decay;
        }
#pragma unroll
        for (int k = 0; k < L; k += 8) {
            const float* x0 = xs + (k + ln.q) * kSsdXsStride + ln.row;
            const float* x1 = x0 + 4 * kSsdXsStride;
            const float t0v = tail[k + ln.q], t1v = tail[k + ln.q + 4];
            uint32_t hi[4], lo[4];
            split_tf32({t0v * x0[0], t0v * x0[8], t1v * x1[0], t1v * x1[8]}, hi, lo);
            const float* b = bs + (k + ln.q) * SB + ln.n0 - 2 * ln.q + ln.g;
#pragma unroll
            for (int j = 0; j < 8; j++) mma_tf32x3(h[j], hi, lo, false, b[8 * j], b[8 * j + 4 * SB], exact);
        }
        if (OUTPUTS) {
            __syncthreads();  // B and C read: their memory takes the warps' partial outputs
            float* ys = bc;   // [WN][L][kSsdYsStride]
#pragma unroll
            for (int tt = 0; tt < TT; tt++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int t = 8 * tt + 2 * ln.q + e % 2;
                    ys[(ln.wn * L + t) * kSsdYsStride + ln.row + 8 * (e / 2)] = acc[tt][e];
                }
            }
            __syncthreads();
            for (int i = threadIdx.x; i < len * kSsdChannels; i += blockDim.x) {
                const int t = i / kSsdChannels, cc = i - t * kSsdChannels;
                if (p0 + cc >= headDim) continue;
                float v = 0.f;
#pragma unroll
                for (int u = 0; u < WN; u++) v += ys[(u * L + t) * kSsdYsStride + cc];
                store_f(y, yDt, (long long)(t0 + t) * inner + head * headDim + p0 + cc,
                        v + skip * xs[t * kSsdXsStride + cc]);
            }
        }
        __syncthreads();  // the chunk's shared memory is free for the next
    }
}

// Loads (from != nullptr) or zeroes a block's h, or stores it: `base` is the head's first channel row of a
// [.., headDim, stateDim] layout, fp32 in the workspace and stDt in the states.
__device__ __forceinline__ void ssd_load_h(const void* from, int dt, long long base, int p0, int headDim, int N,
                                           float (&h)[8][4]) {
    const SsdLane ln;
#pragma unroll
    for (int j = 0; j < 8; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int p = p0 + ln.row + 8 * (e / 2), n = ln.n0 + 8 * j + e % 2;
            h[j][e] = from != nullptr && p < headDim && n < N ? load_f(from, dt, (base + p) * N + n) : 0.f;
        }
    }
}

__device__ __forceinline__ void ssd_store_h(void* to, int dt, long long base, int p0, int headDim, int N,
                                            const float (&h)[8][4]) {
    const SsdLane ln;
#pragma unroll
    for (int j = 0; j < 8; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int p = p0 + ln.row + 8 * (e / 2), n = ln.n0 + 8 * j + e % 2;
            if (p < headDim && n < N) store_f(to, dt, (base + p) * N + n, h[j][e]);
        }
    }
}

// A piece kernel's block (item, head, channel tile), item the piece (or the non-last piece) it scans.
struct SsdBlock {
    int item, head, p0;
    __device__ SsdBlock(int heads, int headDim) {
        const int tiles = (headDim + kSsdChannels - 1) / kSsdChannels;
        const int ih = blockIdx.x / tiles;
        p0 = (blockIdx.x - ih * tiles) * kSsdChannels;
        item = ih / heads;
        head = ih - item * heads;
    }
};

// Block (non-last piece k, head, channel tile): the piece scanned from a zero state; the state it adds goes to the
// next piece's workspace slot and its decay (the product of its chunks') beside it, for mamba_ssd_pass.
template <int NMAX>
__device__ __forceinline__ void ssd_piece_state_body(
    const void* xbc, int xDt, const void* proj, int projDt, const void* aLog, int aDt, const void* dtBias, int dtbDt,
    const int* table, int cap, float* work, float* decays, int heads, int headDim, int groups, int stateDim,
    float dtMin, float dtMax) {
    await_previous_kernel();
    const SsdPieces<const int> t(table, cap);
    const SsdBlock b(heads, headDim);
    const int head = b.head, p0 = b.p0;
    if (b.item >= t.head[3]) return;
    const int slot = t.innerSlot[b.item], piece = t.slotPiece[slot], first = t.pieceStart[piece];
    const int end = first + kSsdPieceTokens;  // not the segment's last piece: a whole one
    float h[8][4];
    ssd_load_h(nullptr, DT_F32, 0, p0, headDim, stateDim, h);
    float decay = 1.f;
    ssd_chunks<NMAX, false>(xbc, xDt, proj, projDt, -expf(load_f(aLog, aDt, head)), load_f(dtBias, dtbDt, head), 0.f,
                            nullptr, 0, head, p0, heads, headDim, groups, stateDim, dtMin, dtMax, first, end, h,
                            decay);
    ssd_store_h(work, DT_F32, ((long long)(slot + 1) * heads + head) * headDim, p0, headDim, stateDim, h);
    if (threadIdx.x == 0 && p0 == 0) decays[(long long)(slot + 1) * heads + head] = decay;
}

// Thread per (multi segment, state value), grid-stride: the entering state of each of the segment's pieces, from
// the slot's state through each earlier piece's decay and added state; the slot's state itself is not written.
extern "C" __global__ void mamba_ssd_pass(const void* states, int stDt, const int* slots, const int* table, int cap,
                                          float* work, const float* decays, int heads, int headDim, int stateDim) {
    await_previous_kernel();
    const SsdPieces<const int> t(table, cap);
    const long long values = (long long)heads * headDim * stateDim;
    const long long total = t.head[1] * values;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const int m = (int)(e / values);
        const long long v = e - m * values;
        const int head = (int)(v / ((long long)headDim * stateDim));
        const int slot0 = t.multiSlot[m], count = t.multiCount[m];
        float h = load_f(states, stDt, (long long)slots[t.multiSeg[m]] * values + v);
        work[slot0 * values + v] = h;
        for (int i = 1; i < count; i++) {
            const long long at = (slot0 + i) * values + v;
            h = decays[(long long)(slot0 + i) * heads + head] * h + work[at];
            work[at] = h;
        }
    }
}

// Block (piece, head, channel tile): the piece scanned from its entering state (the slot's state for a segment's
// only piece, else the workspace's), outputs written; the segment's last piece writes the state back.
template <int NMAX>
__device__ __forceinline__ void ssd_scan_body(
    const void* xbc, int xDt, const void* proj, int projDt, const void* aLog, int aDt, const void* dtBias, int dtbDt,
    const void* dSkip, int dDt, void* states, int stDt, const int* slots, const int* starts, const int* table, int cap,
    const float* work, void* y, int yDt, int heads, int headDim, int groups, int stateDim, float dtMin, float dtMax) {
    await_previous_kernel();
    const SsdPieces<const int> t(table, cap);
    const SsdBlock b(heads, headDim);
    const int piece = b.item, head = b.head, p0 = b.p0;
    if (piece >= t.head[0]) return;
    const int seg = t.pieceSeg[piece], slot = t.pieceSlot[piece], first = t.pieceStart[piece];
    const int segEnd = starts[seg + 1], end = min(first + kSsdPieceTokens, segEnd);
    const long long stateBase = ((long long)slots[seg] * heads + head) * headDim;
    float h[8][4];
    if (slot < 0) {
        ssd_load_h(states, stDt, stateBase, p0, headDim, stateDim, h);
    } else {
        ssd_load_h(work, DT_F32, ((long long)slot * heads + head) * headDim, p0, headDim, stateDim, h);
    }
    float decay = 1.f;
    ssd_chunks<NMAX, true>(xbc, xDt, proj, projDt, -expf(load_f(aLog, aDt, head)), load_f(dtBias, dtbDt, head),
                           load_f(dSkip, dDt, head), y, yDt, head, p0, heads, headDim, groups, stateDim, dtMin, dtMax,
                           first, end, h, decay);
    if (end == segEnd) ssd_store_h(states, stDt, stateBase, p0, headDim, stateDim, h);
}

// The piece kernels at states of up to 64, 128 and 256 values (CudaStateSpace.scanKernel picks the smallest that
// holds one); the scan with as many blocks an SM as fit its registers without spilling.
#define MSTAR_SSD_SCAN(NMAX, BLOCKS)                                                                                   \
    extern "C" __global__ void __launch_bounds__(ssd_threads(NMAX)) mamba_ssd_piece_state_n##NMAX(                     \
        const void* xbc, int xDt, const void* proj, int projDt, const void* aLog, int aDt, const void* dtBias,         \
        int dtbDt, const int* table, int cap, float* work, float* decays, int heads, int headDim, int groups,          \
        int stateDim, float dtMin, float dtMax) {                                                                      \
        ssd_piece_state_body<NMAX>(xbc, xDt, proj, projDt, aLog, aDt, dtBias, dtbDt, table, cap, work, decays, heads,  \
                                   headDim, groups, stateDim, dtMin, dtMax);                                           \
    }                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(ssd_threads(NMAX), BLOCKS) mamba_ssd_scan_n##NMAX(                    \
        const void* xbc, int xDt, const void* proj, int projDt, const void* aLog, int aDt, const void* dtBias,         \
        int dtbDt, const void* dSkip, int dDt, void* states, int stDt, const int* slots, const int* starts,            \
        const int* table, int cap, const float* work, void* y, int yDt, int heads, int headDim, int groups,            \
        int stateDim, float dtMin, float dtMax) {                                                                      \
        ssd_scan_body<NMAX>(xbc, xDt, proj, projDt, aLog, aDt, dtBias, dtbDt, dSkip, dDt, states, stDt, slots, starts, \
                            table, cap, work, y, yDt, heads, headDim, groups, stateDim, dtMin, dtMax);                 \
    }
MSTAR_SSD_SCAN(64, 3)
MSTAR_SSD_SCAN(128, 3)
MSTAR_SSD_SCAN(256, 1)

// v[i] = p[base + lane + 32·i] for i < PER (0 at and past count) with the dtype known at compile time, so the
// loads need no branch between them and are in flight together.
template <int DT, int PER>
__device__ __forceinline__ void load_lane_values_as(const void* p, long long base, int lane, int count,
                                                    float (&v)[PER]) {
#pragma unroll
    for (int i = 0; i < PER; i++) v[i] = lane + 32 * i < count ? load_f(p, DT, base + lane + 32 * i) : 0.f;
}

// load_lane_values_as for a dtype known at run time: one branch for all PER values.
template <int PER>
__device__ __forceinline__ void load_lane_values(const void* p, int dt, long long base, int lane, int count,
                                                 float (&v)[PER]) {
    switch (dt) {
        case DT_BF16: load_lane_values_as<DT_BF16>(p, base, lane, count, v); break;
        case DT_F16: load_lane_values_as<DT_F16>(p, base, lane, count, v); break;
        case DT_F8_E4M3: load_lane_values_as<DT_F8_E4M3>(p, base, lane, count, v); break;
        default: load_lane_values_as<DT_F32>(p, base, lane, count, v); break;
    }
}

// The decode step. Block (row, head, split) = blockIdx.x, kStepThreads threads: h = h·exp(dt·A) + dt·B·x,
// y = h·C + D·x for each channel of the split's share of the head (a head is split where rows × heads blocks would
// leave SMs idle: at one row, Bamba-9B's 128 heads are 128 blocks). Warp w takes the share's channels w,
// w + kStepWarps, ..., CPW of them at a time, its lanes striding each channel's state row (coalesced, each value read
// and written once), and issues all CPW rows' loads (about 32 values a lane) before the first update: the step is
// bound by the state's bytes, so a warp needs many of them in flight. The first rows' loads go out right after the
// slot's, ahead of the block's dt, decay and D and the lane's B and C values (n = lane, lane + 32, ...), which are
// loaded once for all the block's channels. Lane j loads
// x and stores y of the pass's j-th channel (x reaches the other lanes by shuffle). The state's dtype ST is a
// template argument, so no dtype branch holds registers among the loads in flight.
template <int NMAX, int ST>
__device__ __forceinline__ void ssm_step_body(const void* xbc, int xDt, const void* proj, int projDt, const void* aLog,
                                              int aDt, const void* dtBias, int dtbDt, const void* dSkip, int dDt,
                                              void* states, const int* slots, void* y, int yDt, int heads,
                                              int headDim, int groups, int stateDim, float dtMin, float dtMax,
                                              int splits) {
    constexpr int PER = NMAX / 32;
    constexpr int CPW = NMAX <= 128 ? 8 : 4;
    await_previous_kernel();
    const int rowHead = blockIdx.x / splits, split = blockIdx.x - rowHead * splits;
    const int row = rowHead / heads, head = rowHead - row * heads;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int perSplit = (headDim + splits - 1) / splits;
    const int first = split * perSplit, last = min(headDim, first + perSplit);  // the block's channels
    if (first + warp >= last) return;
    const long long stateBase = ((long long)slots[row] * heads + head) * headDim * stateDim;
    float h[CPW][PER];
    // channels p0, p0 + kStepWarps, ...; past the block's last the last row is read again, and not stored
    const auto loadRows = [&](int p0) {
#pragma unroll
        for (int j = 0; j < CPW; j++) {
            const int p = min(p0 + kStepWarps * j, last - 1);
            load_lane_values_as<ST>(states, stateBase + (long long)p * stateDim, lane, stateDim, h[j]);
        }
    };
    loadRows(first + warp);
    const int inner = heads * headDim, groupStates = groups * stateDim, convDim = inner + 2 * groupStates;
    const int width = inner + convDim + heads;
    const long long xBase = (long long)row * convDim + head * headDim, yBase = (long long)row * inner + head * headDim;
    const long long bBase = (long long)row * convDim + inner + head / (heads / groups) * stateDim;
    float b[PER], c[PER];
    load_lane_values(xbc, xDt, bBase, lane, stateDim, b);
    load_lane_values(xbc, xDt, bBase + groupStates, lane, stateDim, c);
    const float dt = step_size(load_f(proj, projDt, (long long)row * width + inner + convDim + head),
                               load_f(dtBias, dtbDt, head), dtMin, dtMax);
    const float decay = expf(dt * -expf(load_f(aLog, aDt, head)));
    const float skip = load_f(dSkip, dDt, head);
    for (int p0 = first + warp; p0 < last; p0 += kStepWarps * CPW) {
        if (p0 != first + warp) loadRows(p0);
        const int own = p0 + kStepWarps * lane;  // the channel whose x and y this lane handles, when lane < CPW
        const bool owns = lane < CPW && own < last;
        const float ownX = owns ? load_f(xbc, xDt, xBase + own) : 0.f;
        float ownY = 0.f;
#pragma unroll
        for (int j = 0; j < CPW; j++) {
            const int p = p0 + kStepWarps * j;
            if (p >= last) break;  // so are the warp's remaining channels
            const long long at = stateBase + (long long)p * stateDim + lane;  // the lane's value i at at + 32·i
            const float x = __shfl_sync(0xffffffffu, ownX, j);
            float acc = 0.f;
#pragma unroll
            for (int i = 0; i < PER; i++) {
                if (lane + 32 * i < stateDim) {
                    h[j][i] = h[j][i] * decay + dt * b[i] * x;
                    store_f(states, ST, at + 32 * i, h[j][i]);
                    acc += h[j][i] * c[i];
                }
            }
            acc = warp_sum(acc);
            if (lane == j) ownY = acc;
        }
        if (owns) store_f(y, yDt, yBase + own, ownY + skip * ownX);
    }
}

// The step at states of up to 64, 128 and 256 values (CudaStateSpace.stepKernel picks the smallest that holds one),
// with as many blocks an SM as fit the registers a lane's values need without spilling. States are F32, BF16 or F16
// (CudaStateSpace.ssmStep refuses others).
#define MSTAR_SSM_STEP(NMAX, BLOCKS)                                                                                   \
    extern "C" __global__ void __launch_bounds__(kStepThreads, BLOCKS) mamba_ssm_step_n##NMAX(                         \
        const void* xbc, int xDt, const void* proj, int projDt, const void* aLog, int aDt, const void* dtBias,         \
        int dtbDt, const void* dSkip, int dDt, void* states, int stDt, const int* slots, void* y, int yDt, int heads,  \
        int headDim, int groups, int stateDim, float dtMin, float dtMax, int splits) {                                 \
        switch (stDt) {                                                                                                \
            case DT_BF16: MSTAR_SSM_STEP_AS(NMAX, DT_BF16); break;                                                     \
            case DT_F16: MSTAR_SSM_STEP_AS(NMAX, DT_F16); break;                                                       \
            default: MSTAR_SSM_STEP_AS(NMAX, DT_F32); break;                                                           \
        }                                                                                                              \
    }
#define MSTAR_SSM_STEP_AS(NMAX, ST)                                                                                    \
    ssm_step_body<NMAX, ST>(xbc, xDt, proj, projDt, aLog, aDt, dtBias, dtbDt, dSkip, dDt, states, slots, y, yDt,       \
                            heads, headDim, groups, stateDim, dtMin, dtMax, splits)
MSTAR_SSM_STEP(64, 4)
MSTAR_SSM_STEP(128, 3)
MSTAR_SSM_STEP(256, 2)

// One block per (row, group), up to kNormThreads threads: v = y·silu(z) over the group's columns, normalised by its
// root mean square, times the weight. Two passes over the row (sum of squares, then the store), so out may be y.
extern "C" __global__ void __launch_bounds__(kNormThreads)
    mamba_gated_rms_norm(const void* y, int yDt, const void* gate, int gDt, const void* weight, int wDt, void* out,
                         int outDt, int inner, int gateWidth, int groups, float eps) {
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
