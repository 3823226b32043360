package org.mstar.device.cuda;

import static org.mstar.device.cuda.Elementwise.code;

import org.mstar.device.DType;
import org.mstar.device.Mamba2Shape;

/**
 * Launchers of the Mamba2 kernels (mamba2.cu) behind {@link org.mstar.device.StateSpaceOps}: shapes are checked on
 * the host, slots and segment starts are read by the kernels from device memory.
 */
final class CudaStateSpace {
    /** kMaxConvKernel in mamba2.cu: the window a conv thread keeps in registers. */
    private static final int MAX_CONV_KERNEL = 8;
    /** kConvThreads and kConvRuns: a conv block, and the runs of tokens it cuts a prefill segment into. */
    static final int CONV_THREADS = 256;
    static final int CONV_RUNS = 8;
    /**
     * The largest state the scan and the decode step hold (mamba_ssd_scan_n256, mamba_ssm_step_n256), the scan's
     * channels per block (kSsdChannels) and the state values one of its warps holds (kSsdWarpStates).
     */
    static final int MAX_STATE = 256;
    static final int SCAN_CHANNELS = 64;
    static final int SCAN_WARP_STATES = 64;
    /** kSsdPieceTokens: the tokens of a segment one scan block walks; longer segments are cut into such pieces. */
    static final int PIECE_TOKENS = 256;
    /** The piece table's head ints and per-piece arrays (SsdPieces in mamba2.cu). */
    private static final int TABLE_HEAD = 4;
    private static final int TABLE_ARRAYS = 8;
    /** The piece table is laid out by one warp. */
    private static final int WARP = 32;
    /** The pass's grid-stride blocks: enough to fill every SM, each thread one state value of a long segment. */
    private static final int PASS_THREADS = 256;
    private static final int PASS_BLOCKS_PER_SM = 8;
    /** kStepThreads: the decode step's block, one per (row, head) or per share of one ({@link #stepSplits}). */
    static final int STEP_THREADS = 256;
    private static final int STEP_WARPS = STEP_THREADS / WARP;
    /** Blocks an SM the decode step's grid is made to fill where a batch is small: all its state loads at once. */
    private static final int STEP_BLOCKS_PER_SM = 8;
    /** kNormThreads: the gated norm's block, one per (row, group). */
    static final int NORM_THREADS = 1024;

    private final CudaDevice device;

    CudaStateSpace(CudaDevice device) {
        this.device = device;
    }

    void causalConv1d(CudaTensor proj, CudaTensor weight, CudaTensor bias, CudaTensor states, CudaTensor slots,
                      CudaTensor starts, Mamba2Shape s, CudaTensor xbc) {
        int conv = s.convDim();
        int k = s.convKernel();
        long segments = checkSegments(slots, starts, states, "causalConv1d");
        if (k > MAX_CONV_KERNEL) {
            throw new IllegalArgumentException("causalConv1d: a kernel of width " + k + "; mamba_causal_conv1d takes"
                    + " at most " + MAX_CONV_KERNEL);
        }
        if (weight.numel() != (long) conv * k || (bias != null && bias.numel() != conv)
                || states.numel() / states.dim(0) != (long) conv * (k - 1) || proj.dim(-1) != s.projWidth()
                || xbc.numel() != proj.numel() / s.projWidth() * conv) {
            throw new IllegalArgumentException("causalConv1d: proj " + proj + ", weight " + weight + ", bias " + bias
                    + ", states " + states + " and xbc " + xbc + " do not fit " + s);
        }
        if (segments == 0) {
            return;
        }
        int runs = convRuns(proj.numel() / s.projWidth(), segments);
        long channels = CONV_THREADS / runs;
        long tiles = (conv + channels - 1) / channels;
        kernel("mamba_causal_conv1d").launch(device.stream(), Math.toIntExact(segments * tiles), 1, 1, CONV_THREADS, 0,
                new KernelArgs().tensor(proj).i32(code(proj))
                .tensor(weight).i32(code(weight)).tensor(bias).i32(bias == null ? 0 : code(bias)).tensor(states)
                .i32(code(states)).tensor(slots).tensor(starts).tensor(xbc).i32(code(xbc)).i32((int) segments)
                .i32(conv).i32(k).i32(s.projWidth()).i32(s.xbcColumn()).i32(runs), "causalConv1d");
    }

    /**
     * Runs a conv thread's channel is cut into per segment: {@link #CONV_RUNS} when a segment may be longer than a
     * token (prefill), one when the tokens are no more than the segments (decode rows), so no thread idles.
     */
    static int convRuns(long tokens, long segments) {
        return tokens > segments ? CONV_RUNS : 1;
    }

    void ssdScan(CudaTensor xbc, CudaTensor proj, CudaTensor aLog, CudaTensor dtBias, CudaTensor d, CudaTensor states,
                 CudaTensor slots, CudaTensor starts, Mamba2Shape s, CudaTensor y) {
        long segments = checkSegments(slots, starts, states, "ssdScan");
        checkScan(xbc, proj, aLog, dtBias, d, states, s, y, "ssdScan");
        if (s.stateDim() > MAX_STATE) {
            throw new IllegalArgumentException("ssdScan: states of " + s.stateDim() + "; mamba_ssd_scan takes at most "
                    + MAX_STATE);
        }
        if (segments == 0) {
            return;
        }
        long tokens = proj.numel() / s.projWidth();
        long tiles = (s.headDim() + SCAN_CHANNELS - 1) / SCAN_CHANNELS;
        ScanPieces bounds = ScanPieces.of(tokens, segments);
        CudaTensor table = device.scratch("ssd.pieces", DType.I32, TABLE_HEAD + TABLE_ARRAYS * bounds.pieces());
        kernel("mamba_ssd_pieces").launch(device.stream(), 1, 1, 1, WARP, 0, new KernelArgs().tensor(starts)
                .i32((int) segments).i32(bounds.pieces()).tensor(table), "ssdScan");
        CudaTensor work = null;
        if (bounds.innerPieces() > 0) {
            long values = (long) s.heads() * s.headDim() * s.stateDim();
            work = device.scratch("ssd.work", DType.F32, bounds.workSlots(), values);
            CudaTensor decays = device.scratch("ssd.decays", DType.F32, bounds.workSlots(), s.heads());
            kernel(pieceStateKernel(s.stateDim())).launch(device.stream(),
                    Math.toIntExact(bounds.innerPieces() * s.heads() * tiles), 1, 1, scanThreads(s.stateDim()), 0,
                    new KernelArgs().tensor(xbc).i32(code(xbc)).tensor(proj).i32(code(proj)).tensor(aLog)
                            .i32(code(aLog)).tensor(dtBias).i32(code(dtBias)).tensor(table).i32(bounds.pieces())
                            .tensor(work).tensor(decays).i32(s.heads()).i32(s.headDim()).i32(s.groups())
                            .i32(s.stateDim()).f32(s.dtMin()).f32(s.dtMax()), "ssdScan");
            long passValues = bounds.multiPieceSegments() * values;
            int passBlocks = (int) Math.min((long) device.context().multiprocessors() * PASS_BLOCKS_PER_SM,
                    (passValues + PASS_THREADS - 1) / PASS_THREADS);
            kernel("mamba_ssd_pass").launch(device.stream(), passBlocks, 1, 1, PASS_THREADS, 0, new KernelArgs()
                    .tensor(states).i32(code(states)).tensor(slots).tensor(table).i32(bounds.pieces()).tensor(work)
                    .tensor(decays).i32(s.heads()).i32(s.headDim()).i32(s.stateDim()), "ssdScan");
        }
        kernel(scanKernel(s.stateDim())).launch(device.stream(), Math.toIntExact(bounds.pieces() * s.heads() * tiles),
                1, 1, scanThreads(s.stateDim()), 0,
                scanArgs(xbc, proj, aLog, dtBias, d, states, slots).tensor(starts).tensor(table).i32(bounds.pieces())
                        .tensor(work).tensor(y).i32(code(y)).i32(s.heads()).i32(s.headDim()).i32(s.groups())
                        .i32(s.stateDim()).f32(s.dtMin()).f32(s.dtMax()), "ssdScan");
    }

    /**
     * Upper bounds, from the step's token and segment counts alone (the segments' lengths stay on the device), on
     * what mamba_ssd_pieces lays out: every piece; the pieces that are not their segment's last (each a whole
     * piece: at most tokens − 1 over a piece); the segments longer than a piece; and the workspace slots, one per
     * piece of those segments.
     */
    record ScanPieces(int pieces, long innerPieces, long multiPieceSegments) {
        static ScanPieces of(long tokens, long segments) {
            return new ScanPieces(Math.toIntExact((tokens + PIECE_TOKENS - 1) / PIECE_TOKENS + segments),
                    tokens > 0 ? (tokens - 1) / PIECE_TOKENS : 0, tokens / (PIECE_TOKENS + 1));
        }

        long workSlots() {
            return innerPieces + multiPieceSegments;
        }
    }

    void ssmStep(CudaTensor xbc, CudaTensor proj, CudaTensor aLog, CudaTensor dtBias, CudaTensor d, CudaTensor states,
                 CudaTensor slots, Mamba2Shape s, CudaTensor y) {
        requireI32(slots, "ssmStep slots");
        checkScan(xbc, proj, aLog, dtBias, d, states, s, y, "ssmStep");
        long rows = slots.numel();
        if (s.stateDim() > MAX_STATE) {
            throw new IllegalArgumentException("ssmStep: states of " + s.stateDim()
                    + "; mamba_ssm_step_n256 takes at most " + MAX_STATE);
        }
        if (states.dtype() != DType.F32 && states.dtype() != DType.BF16 && states.dtype() != DType.F16) {
            throw new IllegalArgumentException("ssmStep: states " + states + "; mamba_ssm_step takes F32, BF16 or F16");
        }
        if (proj.numel() != rows * s.projWidth()) {
            throw new IllegalArgumentException("ssmStep: proj " + proj + " is not " + rows + " rows of " + s);
        }
        if (rows == 0) {
            return;
        }
        int splits = stepSplits(rows * s.heads(), s.headDim(), device.context().multiprocessors());
        kernel(stepKernel(s.stateDim())).launch(device.stream(), Math.toIntExact(rows * s.heads() * splits), 1, 1,
                STEP_THREADS, 0, scanArgs(xbc, proj, aLog, dtBias, d, states, slots).tensor(y).i32(code(y))
                        .i32(s.heads()).i32(s.headDim()).i32(s.groups()).i32(s.stateDim()).f32(s.dtMin())
                        .f32(s.dtMax()).i32(splits), "ssmStep");
    }

    /**
     * Blocks each (row, head) of the decode step is split into: enough for {@link #STEP_BLOCKS_PER_SM} blocks an SM
     * when rows × heads are fewer (one row of Bamba-9B: 128 heads), at most one channel a warp.
     */
    static int stepSplits(long rowHeads, int headDim, int sms) {
        long wanted = ((long) sms * STEP_BLOCKS_PER_SM + rowHeads - 1) / rowHeads;
        return (int) Math.max(1, Math.min(wanted, (headDim + STEP_WARPS - 1) / STEP_WARPS));
    }

    void gatedRmsNorm(CudaTensor y, CudaTensor gate, CudaTensor weight, int groups, float eps, CudaTensor out) {
        long inner = y.dim(-1);
        long gateWidth = gate.dim(-1);
        long rows = y.numel() / inner;
        if (groups < 1 || inner % groups != 0 || weight.numel() != inner || out.numel() != y.numel()
                || gate.numel() != rows * gateWidth || gateWidth < inner) {
            throw new IllegalArgumentException("gatedRmsNorm of y " + y + " gated by " + gate + " in " + groups
                    + " groups, weight " + weight + ", out " + out);
        }
        if (rows == 0) {
            return;
        }
        kernel("mamba_gated_rms_norm").launch(device.stream(), Math.toIntExact(rows * groups), 1, 1, NORM_THREADS, 0,
                new KernelArgs().tensor(y).i32(code(y)).tensor(gate).i32(code(gate)).tensor(weight).i32(code(weight))
                        .tensor(out).i32(code(out)).i32((int) inner).i32((int) gateWidth).i32(groups).f32(eps),
                "gatedRmsNorm");
    }

    /** The scan instantiation for states of {@code stateDim}: the smallest of 64, 128 and 256 that holds one. */
    static String scanKernel(int stateDim) {
        return "mamba_ssd_scan_n" + stateSize(stateDim);
    }

    /** The instantiation that scans a piece's own state, sized as {@link #scanKernel}'s. */
    static String pieceStateKernel(int stateDim) {
        return "mamba_ssd_piece_state_n" + stateSize(stateDim);
    }

    /**
     * ssd_threads: a scan block of 16-channel warps over the tile's channels by the state, each warp
     * {@link #SCAN_WARP_STATES} of its values.
     */
    static int scanThreads(int stateDim) {
        return WARP * (SCAN_CHANNELS / 16) * (stateSize(stateDim) / SCAN_WARP_STATES);
    }

    /** The decode step's instantiation for states of {@code stateDim}, sized as {@link #scanKernel}'s. */
    static String stepKernel(int stateDim) {
        return "mamba_ssm_step_n" + stateSize(stateDim);
    }

    private static int stateSize(int stateDim) {
        return stateDim <= 64 ? 64 : stateDim <= 128 ? 128 : MAX_STATE;
    }

    private Kernel kernel(String name) {
        device.enter();
        return device.kernel(name);
    }

    private static KernelArgs scanArgs(CudaTensor xbc, CudaTensor proj, CudaTensor aLog, CudaTensor dtBias,
                                       CudaTensor d, CudaTensor states, CudaTensor slots) {
        return new KernelArgs().tensor(xbc).i32(code(xbc)).tensor(proj).i32(code(proj)).tensor(aLog).i32(code(aLog))
                .tensor(dtBias).i32(code(dtBias)).tensor(d).i32(code(d)).tensor(states).i32(code(states))
                .tensor(slots);
    }

    private static void checkScan(CudaTensor xbc, CudaTensor proj, CudaTensor aLog, CudaTensor dtBias, CudaTensor d,
                                  CudaTensor states, Mamba2Shape s, CudaTensor y, String op) {
        long tokens = proj.numel() / s.projWidth();
        if (proj.dim(-1) != s.projWidth() || aLog.numel() != s.heads() || dtBias.numel() != s.heads()
                || d.numel() != s.heads() || xbc.numel() != tokens * s.convDim() || y.numel() != tokens * s.inner()
                || states.numel() / states.dim(0) != (long) s.heads() * s.headDim() * s.stateDim()) {
            throw new IllegalArgumentException(op + ": xbc " + xbc + ", proj " + proj + ", aLog " + aLog + ", dtBias "
                    + dtBias + ", d " + d + ", states " + states + ", y " + y + " do not fit " + s);
        }
    }

    /** The segment count; the starts themselves stay on the device, so their values are the caller's to keep right. */
    private static long checkSegments(CudaTensor slots, CudaTensor starts, CudaTensor states, String op) {
        requireI32(slots, op + " slots");
        requireI32(starts, op + " starts");
        if (starts.numel() != slots.numel() + 1 || states.rank() < 2) {
            throw new IllegalArgumentException(op + ": starts " + starts + " must be one longer than slots " + slots
                    + ", states " + states + " [slots, ...]");
        }
        return slots.numel();
    }

    private static void requireI32(CudaTensor t, String what) {
        if (t.dtype() != DType.I32) {
            throw new IllegalArgumentException(what + " must be I32, got " + t);
        }
    }
}
