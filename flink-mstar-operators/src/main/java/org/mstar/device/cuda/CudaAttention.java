package org.mstar.device.cuda;

import java.util.List;
import java.util.stream.Stream;
import org.mstar.device.DType;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.UnsupportedOnDeviceException;

/**
 * Paged attention launchers. Decode plans (one query per sequence) use split-KV: blocks per KV head serve
 * that head's query heads (grouped-query heads share the K/V load), and each sequence's visible keys are cut
 * into as many slices as the step needs to fill the GPU ({@link #decodeSplits}): many for one long
 * sequence, none for a large batch. The block that finishes a sequence's last slice merges the slices, so
 * decode is one launch. bf16 pools at head dims {@link #TC_DECODE_HEAD_DIMS} run the slices on the tensor
 * cores, the others on CUDA cores. The cut depends on the batch, so a sequence's result may differ in the last bits
 * from batch to batch (batch-invariant numerics route decode rows to the tensor-core kernel instead). Other
 * bf16 plans use the tensor-core prefill kernel
 * (attention_prefill_mma.cu: 256 rows of (query, grouped head) pairs per block, 128 at head dim 256, one
 * block per row tile, KV head and sequence), which also serves decode at the head dims the decode kernel
 * lacks (80, 96), and every decode row when the device's numerics are batch-invariant (in a decode shape of
 * fewer rows per block): the kernel's result for a row depends only on that row's query and keys (its key
 * tiles start at multiples of the tile size), so a token computed as a decode row and recomputed inside a
 * prefill chunk gets the same bits. On Hopper, with {@code warpgroupAttention} on, bf16 prefill at head dim 128 runs on
 * the warpgroup products instead ({@link WarpgroupAttention}) unless the numerics are batch-invariant. fp32
 * plans use the CUDA-core prefill kernel (32 queries of one head per block). FP8 (E4M3) pools, read by bf16 queries,
 * take the CUDA-core kernels of both kinds, with the codes staged as bytes and widened where they are used (kernels
 * {@code attn_decode_e4m3_*}, {@code attn_prefill_e4m3_*}): half the bytes a key of a bf16 pool moves. Their decode
 * cuts slices by the batch as the bf16 one does, so batch-invariant numerics refuse an FP8 pool. The
 * plan's {@code maxKvLen} and {@code maxQoLen} must bound every sequence's key and query counts: they size
 * the grids (slices per sequence, query tiles per sequence).
 */
final class CudaAttention {
    private static final int DECODE_THREADS = 128;
    private static final int PREFILL_THREADS = 128;
    private static final int PREFILL_QUERY_TILE = 32;
    static final int MMA_THREADS = 256;
    /** MmaDecodeShape in attention_prefill_mma.cu: four warps of one 16-row mma tile. */
    private static final int MMA_DECODE_THREADS = 128;
    private static final int MMA_DECODE_ROWS = 64;
    /** Shortest decode slice (kMinSplitKeys in attention_decode.cu): below it a block's fixed costs dominate. */
    static final int MIN_SPLIT_KEYS = 128;
    /**
     * Longest decode slice (kMaxSliceKeys in attention_decode.cu): one long sequence among many short ones is
     * still cut into several slices, so its blocks do not trail the rest.
     */
    static final int MAX_SLICE_KEYS = 2048;
    /** Pages of one decode slice's page table in shared memory (kSplitPages in attention_decode.cu). */
    static final int SPLIT_PAGES = 512;
    /** At most this many waves of blocks are launched for slices beyond {@link #decodeSplits} (long sequences). */
    private static final int SLICE_WAVES = 4;
    /**
     * CUDA-core decode blocks resident on one SM (128 threads of up to 128 registers: 4 per 64k registers), so the
     * split count aims at one full wave of blocks; the tensor-core blocks' count is the driver's occupancy.
     */
    static final int DECODE_BLOCKS_PER_SM = 4;
    /**
     * Head dims whose bf16 decode slices run on the tensor cores (MSTAR_DECODE_TC_GROUPS in attention_decode.cu:
     * more bytes per issued instruction, so many sequences per step read K/V nearer the memory's bandwidth).
     */
    static final List<Integer> TC_DECODE_HEAD_DIMS = List.of(64, 128);
    /** kTcDecodeWarps, kTcDecodeKeys and kTcDecodeStages in attention_decode.cu. */
    static final int TC_DECODE_WARPS = 3;
    static final int TC_DECODE_KEYS = 16;
    static final int TC_DECODE_STAGES = 2;
    /**
     * Query heads of an FP8 pool's decode block (MSTAR_DECODE_E4M3_GROUPS in attention_decode.cu): its lanes widen
     * 16 codes each, twice a bf16 lane's elements, and eight heads' combine would outgrow the static shared memory.
     */
    static final int FP8_DECODE_MAX_HEADS = 4;
    /**
     * Head dims of the CUDA-core kernels, fp32, bf16 and FP8 pools, prefill and decode (MSTAR_PREFILL,
     * MSTAR_DECODE_GROUPS, MSTAR_DECODE_E4M3_GROUPS).
     */
    static final List<Integer> SIMT_HEAD_DIMS = List.of(32, 64, 128, 256);
    /**
     * Head dims of the bf16 tensor-core prefill kernel (attention_prefill_mma.cu), which also runs the decode rows
     * of the head dims without a CUDA-core kernel.
     */
    static final List<Integer> MMA_HEAD_DIMS = List.of(64, 80, 96, 128, 256);
    /** Every head dim bf16 runs. */
    static final List<Integer> BF16_HEAD_DIMS =
            Stream.concat(SIMT_HEAD_DIMS.stream(), MMA_HEAD_DIMS.stream()).distinct().sorted().toList();

    private final CudaDevice device;

    CudaAttention(CudaDevice device) {
        this.device = device;
    }

    void run(CudaTensor q, CudaTensor pool, int layer, PagedAttentionPlan plan, CudaTensor out) {
        if (pool.rank() != 6 || pool.dim(2) != 2) {
            throw new IllegalArgumentException("pagedAttention: pool must be [layers, pages, 2, pageSize, kvHeads, "
                    + "headDim], got " + pool);
        }
        int headDim = (int) pool.dim(5);
        int kvHeads = (int) pool.dim(4);
        int pageSize = (int) pool.dim(3);
        int numPages = (int) pool.dim(1);
        if (layer < 0 || layer >= pool.dim(0)) {
            throw new IllegalArgumentException("pagedAttention: layer " + layer + " outside pool of " + pool.dim(0));
        }
        if (pageSize != plan.pageSize()) {
            throw new IllegalArgumentException("pagedAttention: plan page size " + plan.pageSize() + " but pool has "
                    + pageSize);
        }
        if (plan.rows() == 0 || plan.totalQo() == 0) {
            return;
        }
        int qoHeads = (int) (q.numel() / ((long) plan.totalQo() * headDim));
        if (q.dim(-1) != headDim || q.numel() != (long) plan.totalQo() * qoHeads * headDim) {
            throw new IllegalArgumentException("pagedAttention: q " + q + " is not [" + plan.totalQo() + ", heads, "
                    + headDim + "]");
        }
        if (qoHeads % kvHeads != 0) {
            throw new IllegalArgumentException("pagedAttention: " + qoHeads + " query heads do not group over "
                    + kvHeads + " KV heads");
        }
        boolean fp8 = pool.dtype() == DType.F8_E4M3;
        DType qType = fp8 ? DType.BF16 : pool.dtype();
        if (q.dtype() != qType || out.dtype() != qType || out.numel() != q.numel()) {
            throw new IllegalArgumentException("pagedAttention: q " + q + ", pool " + pool + " and out " + out
                    + " must share one dtype (bf16 q and out over an FP8 pool) and q's shape");
        }
        String type = switch (pool.dtype()) {
            case F32 -> "f32";
            case BF16 -> "bf16";
            case F8_E4M3 -> "e4m3";
            default -> throw new IllegalArgumentException("pagedAttention supports F32, BF16 and F8_E4M3 pools, got "
                    + pool.dtype());
        };
        requireHeadDim(headDim, pool.dtype());
        if (fp8 && device.batchInvariant()) {
            throw new UnsupportedOnDeviceException("pagedAttention: an FP8 KV pool has no batch-invariant decode kernel");
        }
        boolean simtDim = SIMT_HEAD_DIMS.contains(headDim);
        CudaTensor qoIndptr = CudaTensor.of(plan.qoIndptr(), "plan.qoIndptr");
        CudaTensor kvIndptr = CudaTensor.of(plan.kvIndptr(), "plan.kvIndptr");
        CudaTensor kvIndices = CudaTensor.of(plan.kvIndices(), "plan.kvIndices");
        CudaTensor lastPageLen = CudaTensor.of(plan.lastPageLen(), "plan.lastPageLen");
        KernelArgs common = new KernelArgs().tensor(q).tensor(pool).tensor(qoIndptr).tensor(kvIndptr).tensor(kvIndices)
                .tensor(lastPageLen).i32(layer).i32(numPages).i32(pageSize).i32(qoHeads).i32(kvHeads)
                .flag(plan.causal()).i32(plan.windowLeft()).flag(plan.contextOnly()).f32(plan.smScale());
        boolean mma = pool.dtype() == DType.BF16 && MMA_HEAD_DIMS.contains(headDim)
                && (!simtDim || device.options().tensorCorePrefill());
        if (plan.isDecode() && simtDim && !(mma && device.batchInvariant())) {
            decode(type, headDim, qoHeads, kvHeads, plan, common, out);
        } else if (mma && plan.isDecode()) {
            int tiles = (qoHeads / kvHeads + MMA_DECODE_ROWS - 1) / MMA_DECODE_ROWS;
            device.kernel("attn_decode_mma_bf16_d" + headDim).launch(device.stream(), tiles, kvHeads, plan.rows(),
                    MMA_DECODE_THREADS, mmaSmemBytes(MMA_DECODE_ROWS, headDim), common.tensor(out),
                    "pagedAttention decode (tensor cores)");
        } else if (mma && WarpgroupAttention.serves(device, WarpgroupAttention.PAGED_HEAD_DIMS, headDim)) {
            device.kernel("attn_prefill_wgmma_bf16_d" + headDim).launch(device.stream(),
                    WarpgroupAttention.tiles(plan.maxQoLen(), qoHeads / kvHeads), kvHeads, plan.rows(),
                    WarpgroupAttention.THREADS, WarpgroupAttention.smemBytes(headDim), common.tensor(out),
                    "pagedAttention prefill (warpgroup products)");
        } else if (mma) {
            int rows = mmaRows(headDim);
            int tiles = (plan.maxQoLen() * (qoHeads / kvHeads) + rows - 1) / rows;
            device.kernel("attn_prefill_mma_bf16_d" + headDim).launch(device.stream(), tiles, kvHeads, plan.rows(),
                    MMA_THREADS, mmaSmemBytes(rows, headDim), common.tensor(out), "pagedAttention prefill (tensor cores)");
        } else {
            int smem = (3 * 32 * (headDim + 1) + 32 * 33) * 4;
            int tiles = (plan.maxQoLen() + PREFILL_QUERY_TILE - 1) / PREFILL_QUERY_TILE;
            device.kernel("attn_prefill_" + type + "_d" + headDim).launch(device.stream(), tiles, qoHeads, plan.rows(),
                    PREFILL_THREADS, smem, common.tensor(out), "pagedAttention prefill");
        }
    }

    /** @throws UnsupportedOnDeviceException unless kernels for {@code headDim} in {@code dtype} are compiled */
    static void requireHeadDim(int headDim, DType dtype) {
        if (!(dtype == DType.BF16 ? BF16_HEAD_DIMS : SIMT_HEAD_DIMS).contains(headDim)) {
            throw new UnsupportedOnDeviceException("attention head dim " + headDim + " has no CUDA kernels for "
                    + dtype + " (bf16: " + BF16_HEAD_DIMS + "; fp32 and FP8 KV: " + SIMT_HEAD_DIMS + ")");
        }
    }

    /** MmaPrefillShape&lt;D&gt;::ROWS in attention_prefill_mma.cu: packed (query, grouped head) rows per block. */
    static int mmaRows(int headDim) {
        return headDim <= 128 ? 256 : 128;
    }

    /** MmaShape::SMEM_BYTES: Q rows, then K and V tiles of two stages, rows padded by 8 elements. */
    static int mmaSmemBytes(int rows, int headDim) {
        int keys = headDim <= 128 ? 64 : 32;
        return (rows + 4 * keys) * (headDim + 8) * 2;
    }

    private void decode(String type, int headDim, int qoHeads, int kvHeads, PagedAttentionPlan plan, KernelArgs common,
                        CudaTensor out) {
        int group = qoHeads / kvHeads;
        int heads = decodeHeads(type, group);
        int blocksPerRow = kvHeads * (group / heads);
        int span = plan.windowLeft() >= 0 ? Math.min(plan.maxKvLen(), plan.windowLeft() + 1) : plan.maxKvLen();
        int sms = device.context().multiprocessors();
        boolean tensorCores = tensorCoreDecode(type, headDim);
        Kernel kernel = device.kernel(decodeKernel(type, headDim, heads));
        int threads = tensorCores ? TC_DECODE_WARPS * 32 : DECODE_THREADS;
        int smem = tensorCores ? tcDecodeSmemBytes(headDim) : 0;
        int blocksPerSm = tensorCores ? kernel.residentBlocksPerSm(threads, smem) : DECODE_BLOCKS_PER_SM;
        int splits = decodeSplits(plan.rows(), blocksPerRow, span, sms, blocksPerSm);
        int slices = maxSlices(splits, span, plan.pageSize());
        int width = gridWidth(splits, slices, plan.rows() * blocksPerRow, sms, blocksPerSm);
        CudaTensor partialO = null;
        CudaTensor partialLse = null;
        CudaTensor splitDone = null;
        if (slices > 1) {
            long slots = (long) plan.rows() * qoHeads * slices;
            partialO = device.scratch("attn.partialO", DType.F32, slots * headDim);
            partialLse = device.scratch("attn.partialLse", DType.F32, slots);
            splitDone = device.zeroedScratch("attn.splitDone", DType.I32, (long) plan.rows() * blocksPerRow);
        }
        kernel.launch(device.stream(), width, blocksPerRow, plan.rows(), threads, smem,
                common.i32(splits).i32(slices).tensor(out).tensor(partialO).tensor(partialLse).tensor(splitDone),
                "pagedAttention decode");
    }

    /** Query heads one decode block serves: the largest of 8, 4, 2, 1 that divides the group (4 for an FP8 pool). */
    static int decodeHeads(String type, int group) {
        int heads = group % 8 == 0 ? 8 : group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1;
        return type.equals("e4m3") ? Math.min(heads, FP8_DECODE_MAX_HEADS) : heads;
    }

    static boolean tensorCoreDecode(String type, int headDim) {
        return type.equals("bf16") && TC_DECODE_HEAD_DIMS.contains(headDim);
    }

    /** The split-KV decode kernel for a pool type, head dim and query heads per block. */
    static String decodeKernel(String type, int headDim, int heads) {
        return (tensorCoreDecode(type, headDim) ? "attn_decode_tc_" : "attn_decode_") + type + "_d" + headDim + "_g"
                + heads;
    }

    /** TcDecodeShape::STAGING_BYTES: per warp, kTcDecodeStages stages of K and V rows padded by 8 elements. */
    static int tcDecodeSmemBytes(int headDim) {
        return TC_DECODE_WARPS * TC_DECODE_STAGES * 2 * TC_DECODE_KEYS * (headDim + 8) * 2;
    }

    /**
     * Decode blocks per (sequence, KV head group) for a step of {@code rows} sequences of at most
     * {@code span} visible keys: as many as one wave of blocks over {@code sms} SMs that hold {@code blocksPerSm}
     * each takes, but no more than slices of {@link #MIN_SPLIT_KEYS} give. Rounded down: one split more would
     * spill a few blocks into a second wave that the whole step waits for (16 rows x 8 KV heads over 528 resident
     * blocks: 4 splits fill 97 % of one wave, 5 would need 1.2 waves). Batch 1 at 16k keys and 8 KV heads, 4 blocks
     * per SM: 66 splits of 249 keys; 64 rows: 1.
     */
    static int decodeSplits(int rows, int blocksPerRow, int span, int sms, int blocksPerSm) {
        long blocks = (long) rows * blocksPerRow;
        int forOccupancy = (int) Math.max(1, blocksPerSm * (long) sms / blocks);
        return Math.max(1, Math.min(forOccupancy, (span + MIN_SPLIT_KEYS - 1) / MIN_SPLIT_KEYS));
    }

    /**
     * Slices per sequence the kernel may cut (slice_keys in attention_decode.cu): at most {@code splits}, unless
     * slices would outgrow {@link #MAX_SLICE_KEYS} or their page table, and then one per that many keys.
     */
    static int maxSlices(int splits, int span, int pageSize) {
        long sliceKeys = Math.min(MAX_SLICE_KEYS, (long) (SPLIT_PAGES - 1) * pageSize);
        return (int) Math.max(splits, (span + sliceKeys - 1) / sliceKeys);
    }

    /**
     * Blocks per (sequence, KV head group) launched: {@code splits}, or more for sequences cut into more
     * slices, up to {@link #SLICE_WAVES} waves of blocks; a block walks the slices past the grid's width.
     */
    static int gridWidth(int splits, int slices, int blocksPerSplit, int sms, int blocksPerSm) {
        long waves = (SLICE_WAVES * blocksPerSm * (long) sms + blocksPerSplit - 1) / blocksPerSplit;
        return (int) Math.max(splits, Math.min(slices, waves));
    }
}
