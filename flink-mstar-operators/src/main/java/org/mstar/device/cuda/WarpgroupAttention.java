package org.mstar.device.cuda;

import java.util.List;

/**
 * Where bf16 prefill attention runs on Hopper's warpgroup products (attention_prefill_wgmma.cu), and its launch
 * sizes: blocks of two warpgroups over {@value #ROWS} packed (query, grouped head) rows, key tiles of
 * {@link #keys(int)} keys in two stages. It serves on sm_90 devices with {@code warpgroupAttention} on and batch
 * invariance off (its key tiles are wider than the decode kernel's, so a row's sums are taken in another order).
 */
final class WarpgroupAttention {
    /** WgmmaShape::THREADS and ROWS. */
    static final int THREADS = 256;
    static final int ROWS = 128;
    /** Head dims of the paged kernel (attn_prefill_wgmma_bf16_d*) and of the ragged one (attn_ragged_wgmma_bf16_d*). */
    static final List<Integer> PAGED_HEAD_DIMS = List.of(128);
    static final List<Integer> RAGGED_HEAD_DIMS = List.of(128, 192);

    private WarpgroupAttention() {
    }

    static boolean serves(CudaDevice device, List<Integer> headDims, int headDim) {
        return device.options().warpgroupAttention() && !device.batchInvariant()
                && device.context().hasWarpgroupProducts() && headDims.contains(headDim);
    }

    /** WgmmaPrefillShape's key tile: d192's output accumulators leave room for 64-key scores only. */
    static int keys(int headDim) {
        return headDim <= 128 ? 128 : 64;
    }

    /** WgmmaShape::SMEM_BYTES: Q, K and V of two stages, and 1 KB to align them on the swizzle's 1024 bytes. */
    static int smemBytes(int headDim) {
        return ROWS * headDim * 2 + 4 * keys(headDim) * headDim * 2 + 1024;
    }

    /** Row tiles of the grid's x extent: a sequence's queries times its query heads per KV head. */
    static int tiles(int maxQueries, int group) {
        return (int) (((long) maxQueries * group + ROWS - 1) / ROWS);
    }
}
