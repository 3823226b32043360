package org.mstar.device.cuda;

import static org.mstar.device.cuda.Elementwise.code;

import org.mstar.device.DType;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.RopeParams;

/**
 * Launchers of the latent (MLA) attention kernels (latent_attention.cu): one block per token for the append, one per
 * (token, head) for the query absorption, the value up-projection and the attention of fp32 rows. bf16 rows at
 * DeepSeek's latent (R 512, Dr 64, heads a multiple of 16), decode or prefill, run latent_attention_mma: 16 heads of a
 * query row share each latent row read on the tensor cores, the keys split into slices that fill the GPU, the slices
 * merged by latent_attention_merge. bf16 absorption and value up-projection are per-head GEMMs on cuBLAS (one strided
 * batched call each) unless the device wants batch-invariant numerics: a block per (token, head) read the head's
 * 128 KB of kv_b from L2 for every token.
 */
final class CudaLatentAttention {
    /** Threads of every latent kernel's block (kLatentThreads in latent_attention.cu). */
    private static final int THREADS = 128;
    /** Longest latent row (R + Dr) the kernels hold per block (kMaxLatentWidth). */
    static final int MAX_WIDTH = 1024;
    /** Longest query nope part the query kernel stages (kMaxNopeDim). */
    private static final int MAX_NOPE = 256;
    /** The latent geometry latent_attention_mma is built for (kLdRank, kLdWidth) and its heads per block (kLdHeads). */
    static final int DECODE_RANK = 512;
    static final int DECODE_WIDTH = 576;
    static final int DECODE_HEADS = 16;
    /** latent_attention_mma's block (kLdWarps warps), shortest slice (kLdMinSliceKeys) and shared memory (kLdSmemBytes). */
    private static final int DECODE_THREADS = 128;
    static final int DECODE_MIN_SLICE_KEYS = 64;
    static final int DECODE_SMEM_BYTES = (16 + 2 * 32) * (576 + 8) * 2 + 16 * 40 * 4;
    /** The most slices a query row's keys are cut into (decodeSplits). */
    private static final int MAX_SPLITS = 64;
    /** The most query rows one launch of latent_attention_mma takes (its grid's z). */
    private static final int MAX_MMA_ROWS = 65_535;

    private final CudaDevice device;
    private final RopeTables ropeTables;
    private final SharedOpState shared;

    CudaLatentAttention(CudaDevice device, SharedOpState shared) {
        this.device = device;
        this.ropeTables = shared.ropeTables();
        this.shared = shared;
    }

    void append(CudaTensor kvA, CudaTensor norm, float eps, CudaTensor pos, RopeParams rope, CudaTensor pool, int layer,
                CudaTensor pages, CudaTensor offsets) {
        requireLatentPool(pool, "latentAppend");
        requireIndex(pos, "latentAppend posIds");
        requireIndex(pages, "latentAppend pageIdx");
        requireIndex(offsets, "latentAppend offsets");
        long n = pages.numel();
        int width = (int) pool.dim(5);
        int rank = (int) norm.numel();
        if (width - rank != rope.rotaryDim() || kvA.numel() != n * width || offsets.numel() != n || pos.numel() < n) {
            throw new IllegalArgumentException("latentAppend: kvA " + kvA + " (norm of " + rank + ", RoPE of "
                    + rope.rotaryDim() + ") into a latent pool of " + width + " for " + n + " tokens");
        }
        if (layer < 0 || layer >= pool.dim(0)) {
            throw new IllegalArgumentException("latentAppend: layer " + layer + " outside pool of " + pool.dim(0));
        }
        if (n == 0) {
            return;
        }
        device.enter();
        CudaTensor inv = ropeTables.table(rope);
        device.kernel("latent_append").launch(device.stream(), Math.toIntExact(n), 1, 1, THREADS, 0,
                new KernelArgs().tensor(kvA).i32(code(kvA)).tensor(norm).i32(code(norm)).f32(eps).tensor(pos)
                        .tensor(inv).tensor(pool).i32(code(pool)).tensor(pages).tensor(offsets).i32(layer)
                        .i32((int) pool.dim(1)).i32((int) pool.dim(3)).i32(rank).i32(rope.rotaryDim())
                        .flag(rope.interleave()), "latentAppend");
    }

    void query(CudaTensor q, CudaTensor kvB, CudaTensor pos, RopeParams rope, CudaTensor out) {
        requireIndex(pos, "latentQuery posIds");
        if (q.rank() != 3 || out.rank() != 3 || kvB.rank() != 3 || q.dim(0) != out.dim(0) || q.dim(1) != out.dim(1)
                || kvB.dim(0) != q.dim(1)) {
            throw new IllegalArgumentException("latentQuery: q " + q + " [n, H, Dn + Dr], kv_b " + kvB
                    + " [H, Dn + Dv, R] and out " + out + " [n, H, R + Dr]");
        }
        int heads = (int) q.dim(1);
        int rank = (int) kvB.dim(2);
        int dr = (int) out.dim(2) - rank;
        int dn = (int) q.dim(2) - dr;
        if (dr != rope.rotaryDim() || dn <= 0 || dn > MAX_NOPE || kvB.dim(1) <= dn || out.dim(2) > MAX_WIDTH
                || pos.numel() < q.dim(0)) {
            throw new IllegalArgumentException("latentQuery: q " + q + " with kv_b " + kvB + " into " + out + " (RoPE of "
                    + rope.rotaryDim() + "; nope dims up to " + MAX_NOPE + ", rows up to " + MAX_WIDTH + ")");
        }
        long blocks = q.dim(0) * heads;
        if (blocks == 0) {
            return;
        }
        device.enter();
        boolean absorbed = onCublas(q, kvB, out);
        if (absorbed) {
            // per head: out[:, h, :R] = q[:, h, :Dn] · W_UK[h], W_UK[h] = kv_b[h, :Dn, :] ([Dn, R], not transposed)
            shared.cublas().gemmPerHead(q, heads * (dn + dr), dn + dr, kvB, 0, rank, kvB.dim(1) * rank, false, out,
                    heads * out.dim(2), out.dim(2), (int) q.dim(0), rank, dn, heads);
        }
        CudaTensor inv = ropeTables.table(rope);
        device.kernel("latent_query").launch(device.stream(), Math.toIntExact(blocks), 1, 1, THREADS, 0,
                new KernelArgs().tensor(q).i32(code(q)).tensor(kvB).i32(code(kvB)).tensor(pos).tensor(inv).tensor(out)
                        .i32(code(out)).i32(heads).i32(dn).i32(dr).i32(rank).i32((int) kvB.dim(1))
                        .flag(rope.interleave()).flag(absorbed), "latentQuery");
    }

    /** Whether the up-projections go to cuBLAS: bf16 throughout, and results that may depend on the row count. */
    private boolean onCublas(CudaTensor x, CudaTensor kvB, CudaTensor out) {
        return x.dtype() == DType.BF16 && kvB.dtype() == DType.BF16 && out.dtype() == DType.BF16
                && !device.batchInvariant();
    }

    void attention(CudaTensor q, CudaTensor pool, int layer, PagedAttentionPlan plan, CudaTensor out) {
        requireLatentPool(pool, "latentAttention");
        int width = (int) pool.dim(5);
        int rank = (int) out.dim(-1);
        if (q.rank() != 3 || q.dim(2) != width || width > MAX_WIDTH || out.numel() != q.dim(0) * q.dim(1) * rank
                || rank > width) {
            throw new IllegalArgumentException("latentAttention: q " + q + " [n, H, " + width + "] into out " + out
                    + " [n, H, R] over a latent pool of rows up to " + MAX_WIDTH);
        }
        if (layer < 0 || layer >= pool.dim(0)) {
            throw new IllegalArgumentException("latentAttention: layer " + layer + " outside pool of " + pool.dim(0));
        }
        if (plan.pageSize() != pool.dim(3)) {
            throw new IllegalArgumentException("latentAttention: plan pages of " + plan.pageSize() + ", pool pages of "
                    + pool.dim(3));
        }
        int heads = (int) q.dim(1);
        long blocks = (long) plan.totalQo() * heads;
        if (blocks == 0) {
            return;
        }
        device.enter();
        if (q.dtype() == DType.BF16 && pool.dtype() == DType.BF16 && out.dtype() == DType.BF16
                && rank == DECODE_RANK && width == DECODE_WIDTH && heads % DECODE_HEADS == 0
                && plan.totalQo() <= MAX_MMA_ROWS) {
            onTensorCores(q, pool, layer, plan, out, heads);
            return;
        }
        device.kernel("latent_attention").launch(device.stream(), Math.toIntExact(blocks), 1, 1, THREADS, 0,
                new KernelArgs().tensor(q).i32(code(q)).tensor(pool).i32(code(pool))
                        .tensor(CudaTensor.of(plan.qoIndptr(), "plan.qoIndptr"))
                        .tensor(CudaTensor.of(plan.kvIndptr(), "plan.kvIndptr"))
                        .tensor(CudaTensor.of(plan.kvIndices(), "plan.kvIndices"))
                        .tensor(CudaTensor.of(plan.lastPageLen(), "plan.lastPageLen")).tensor(out).i32(code(out))
                        .i32(plan.rows()).i32(heads).i32(rank).i32(width).i32(plan.pageSize()).i32((int) pool.dim(1))
                        .i32(layer).f32(plan.smScale()).flag(plan.causal()).i32(plan.windowLeft())
                        .flag(plan.contextOnly()), "latentAttention");
    }

    /**
     * Query rows on the tensor cores: {@link #decodeSplits} slices per row, each block a slice of 16 heads; with more
     * than one, the partials (normalised outputs and log2-sum-exps, in the workspace) are merged per head.
     */
    private void onTensorCores(CudaTensor q, CudaTensor pool, int layer, PagedAttentionPlan plan, CudaTensor out,
                               int heads) {
        int span = plan.windowLeft() >= 0 ? Math.min(plan.maxKvLen(), plan.windowLeft() + 1) : plan.maxKvLen();
        Kernel kernel = device.kernel("latent_attention_mma");
        int headTiles = heads / DECODE_HEADS;
        int rows = plan.totalQo();
        int splits = decodeSplits(rows * headTiles, span, device.context().multiprocessors(),
                kernel.residentBlocksPerSm(DECODE_THREADS, DECODE_SMEM_BYTES));
        CudaTensor partialO = null;
        CudaTensor partialLse = null;
        if (splits > 1) {
            long slots = (long) rows * heads * splits;
            partialO = device.scratch("latent.partialO", DType.F32, slots * DECODE_RANK);
            partialLse = device.scratch("latent.partialLse", DType.F32, slots);
        }
        CudaTensor qoIndptr = CudaTensor.of(plan.qoIndptr(), "plan.qoIndptr");
        CudaTensor kvIndptr = CudaTensor.of(plan.kvIndptr(), "plan.kvIndptr");
        CudaTensor lastPageLen = CudaTensor.of(plan.lastPageLen(), "plan.lastPageLen");
        kernel.launch(device.stream(), splits, headTiles, rows, DECODE_THREADS, DECODE_SMEM_BYTES,
                new KernelArgs().tensor(q).tensor(pool).tensor(qoIndptr).tensor(kvIndptr)
                        .tensor(CudaTensor.of(plan.kvIndices(), "plan.kvIndices")).tensor(lastPageLen).tensor(out)
                        .tensor(partialO).tensor(partialLse).i32(plan.rows()).i32(heads).i32(plan.pageSize())
                        .i32((int) pool.dim(1)).i32(layer).f32(plan.smScale()).flag(plan.causal())
                        .i32(plan.windowLeft()).flag(plan.contextOnly()).i32(splits),
                "latentAttention (tensor cores)");
        if (splits > 1) {
            device.kernel("latent_attention_merge").launch(device.stream(), rows * heads, 1, 1, THREADS, 0,
                    new KernelArgs().tensor(qoIndptr).tensor(kvIndptr).tensor(lastPageLen).tensor(partialO)
                            .tensor(partialLse).tensor(out).i32(plan.rows()).i32(heads).i32(plan.pageSize())
                            .flag(plan.causal()).i32(plan.windowLeft()).flag(plan.contextOnly()).i32(splits),
                    "latentAttention merge");
        }
    }

    /**
     * Slices per query row of a launch of {@code blocks} (row, 16-head) blocks over at most {@code span} keys: enough
     * that the blocks fill one wave of {@code sms} SMs holding {@code blocksPerSm} each, but no slice shorter than
     * {@link #DECODE_MIN_SLICE_KEYS} keys (two tiles) and no more than {@link #MAX_SPLITS} slices: each slice's
     * partial, 32 KB a tile of heads, is read again by the merge. On an H100 a lone row at 512 keys ran faster in 8
     * slices than in 4, at 8192 keys slower in 128 than in 64, at 16384 slower in 256 than in 128 (2026-12-07).
     * Batch 1 at 4096 keys on 132 SMs: 64 slices; batch 64 at 4096: 4.
     */
    static int decodeSplits(int blocks, int span, int sms, int blocksPerSm) {
        int forOccupancy = (int) Math.max(1, (long) blocksPerSm * sms / Math.max(1, blocks));
        int bySpan = (span + DECODE_MIN_SLICE_KEYS - 1) / DECODE_MIN_SLICE_KEYS;
        return Math.max(1, Math.min(MAX_SPLITS, Math.min(forOccupancy, bySpan)));
    }

    void values(CudaTensor latent, CudaTensor kvB, CudaTensor out) {
        if (latent.rank() != 3 || kvB.rank() != 3 || kvB.dim(0) != latent.dim(1) || kvB.dim(2) != latent.dim(2)
                || latent.dim(2) > MAX_WIDTH) {
            throw new IllegalArgumentException("latentValues: latent " + latent + " [n, H, R] with kv_b " + kvB
                    + " [H, Dn + Dv, R] (R up to " + MAX_WIDTH + ")");
        }
        int heads = (int) latent.dim(1);
        int rank = (int) latent.dim(2);
        int dv = (int) out.dim(-1);
        int dn = (int) kvB.dim(1) - dv;
        if (dn < 0 || out.numel() != latent.dim(0) * heads * dv) {
            throw new IllegalArgumentException("latentValues: out " + out + " must be [" + latent.dim(0) + ", " + heads
                    + ", Dv] with Dv <= " + kvB.dim(1));
        }
        long blocks = latent.dim(0) * heads;
        if (blocks == 0) {
            return;
        }
        device.enter();
        if (onCublas(latent, kvB, out)) {
            // per head: out[:, h, :] = latent[:, h, :] · W_UV[h]ᵀ, W_UV[h] = kv_b[h, Dn:, :] ([Dv, R], transposed)
            shared.cublas().gemmPerHead(latent, heads * rank, rank, kvB, (long) dn * rank, rank, kvB.dim(1) * rank,
                    true, out, (long) heads * dv, dv, (int) latent.dim(0), dv, rank, heads);
            return;
        }
        device.kernel("latent_values").launch(device.stream(), Math.toIntExact(blocks), 1, 1, THREADS, 0,
                new KernelArgs().tensor(latent).i32(code(latent)).tensor(kvB).i32(code(kvB)).tensor(out).i32(code(out))
                        .i32(heads).i32(rank).i32(dv).i32(dn).i32((int) kvB.dim(1)), "latentValues");
    }

    private static void requireLatentPool(CudaTensor pool, String op) {
        if (pool.rank() != 6 || pool.dim(2) != 1 || pool.dim(4) != 1) {
            throw new IllegalArgumentException(op + ": a latent pool is [layers, pages, 1, pageSize, 1, R + Dr], got "
                    + pool);
        }
    }

    private static void requireIndex(CudaTensor t, String what) {
        if (t.dtype() != DType.I32) {
            throw new IllegalArgumentException(what + " must be I32, got " + t);
        }
    }
}
