package org.mstar.device.cuda;

/**
 * The tile arithmetic of the mixture-of-experts tensor-core ways (moe.cu): which of them a call takes, how many tiles
 * {@code moe_sort} can list at most (every grid is sized for that, so a launch depends on the row count alone), and
 * the grouped GEMM's launch sizes.
 */
public final class MoeTiles {
    /** kMoeGroupRows, kMoeGroupThreads in moe.cu: the grouped GEMM's assignments a tile and threads a block. */
    static final int GROUP_ROWS = 64;
    static final int GROUP_THREADS = 128;
    /** kMoeGroupLargeRows, kMoeGroupLargeThreads: the same for the 128-row tiles (moe_grouped_*_m128). */
    static final int GROUP_LARGE_ROWS = 128;
    static final int GROUP_LARGE_THREADS = 256;
    /**
     * kMoeWgRows, kMoeWgCols, kMoeWgThreads and kMoeWgSmemBytes: the warpgroup GEMM's assignments a tile, weight rows
     * a block (gate/up: 128 intermediate columns), threads a block and its shared memory (4 stages of 128 + 256 rows
     * of 128 bytes, and 1 KB to align them).
     */
    static final int WARPGROUP_ROWS = 128;
    static final int WARPGROUP_COLS = 256;
    static final int WARPGROUP_THREADS = 256;
    static final int WARPGROUP_SMEM_BYTES = 4 * (WARPGROUP_ROWS + WARPGROUP_COLS) * 128 + 1024;
    /** Output columns of a grouped block: gate/up 64 intermediate columns (128 weight rows), down 128. */
    static final int GROUP_GATE_UP_COLS = 64;
    static final int GROUP_DOWN_COLS = 128;
    /** kMoeGroupStages · kMoeGroupStageBytes: stages of 64 + 128 staged rows of 64 bf16 padded to 144 bytes. */
    static final int GROUP_SMEM_BYTES = 3 * (64 + 128) * (2 * 64 + 16);
    /** The same with 128 staged tile rows. */
    static final int GROUP_LARGE_SMEM_BYTES = 3 * (128 + 128) * (2 * 64 + 16);
    /**
     * Mean assignments per expert above which the grouped GEMM serves instead of the skinny tiles: the skinny tiles
     * read an expert's weights once per 16 of its assignments, the grouped GEMM once per 64, with mma work that only
     * pays off once an expert has more rows than one skinny tile holds.
     */
    static final double GROUPED_MEAN_ROWS = 16;
    /**
     * Mean assignments per expert above which the grouped GEMM's tiles hold 128 of them instead of 64: a 128-row
     * block moves a third less through L2 for its products, which bounds the 64-row blocks at prefill sizes, and
     * once an expert fills more than one 64-row tile on average the larger tiles waste no more rows than they save.
     */
    static final double LARGE_TILE_MEAN_ROWS = 64;
    /** Mean assignments per expert up to which the skinny tiles hold 8 of them (moe_skinny_*_m1), above it 16. */
    static final double SMALL_TILE_MEAN_ROWS = 2;

    private MoeTiles() {}

    /** Whether {@code rows} rows choosing {@code topK} of {@code experts} experts take the grouped GEMM. */
    public static boolean grouped(int rows, int topK, int experts) {
        return meanRows(rows, topK, experts) > GROUPED_MEAN_ROWS;
    }

    /** Assignments a tile of the tensor-core way these rows take: 64 or 128 grouped, else 8 or 16 (skinny). */
    static int tileRows(int rows, int topK, int experts) {
        if (grouped(rows, topK, experts)) {
            return meanRows(rows, topK, experts) > LARGE_TILE_MEAN_ROWS ? GROUP_LARGE_ROWS : GROUP_ROWS;
        }
        return meanRows(rows, topK, experts) <= SMALL_TILE_MEAN_ROWS ? 8 : 16;
    }

    /**
     * Whether these rows fill the warpgroup GEMM's tiles of 128 well enough for it to serve (where the 128-row
     * grouped tiles would): more than 64 assignments an expert on average, so that an expert's last tile, of at most
     * 64 rows more often than not, costs half a tile's products.
     */
    public static boolean warpgroup(int rows, int topK, int experts) {
        return meanRows(rows, topK, experts) > LARGE_TILE_MEAN_ROWS;
    }

    /** Blocks of moe_wgmma_gate_up: a block per tile and 128 intermediate columns. */
    static int warpgroupGateUpBlocks(int maxTiles, int inter) {
        return maxTiles * ((inter + WARPGROUP_COLS / 2 - 1) / (WARPGROUP_COLS / 2));
    }

    /** Blocks of moe_wgmma_down: a block per tile and 256 output columns. */
    static int warpgroupDownBlocks(int maxTiles, int hidden) {
        return maxTiles * ((hidden + WARPGROUP_COLS - 1) / WARPGROUP_COLS);
    }

    /**
     * The most tiles of up to {@code tileRows} that {@code moe_sort} can list for {@code assignments} over
     * {@code experts}: every tile holds at least one assignment, and only an expert's last tile is partial.
     */
    static int maxTiles(int assignments, int experts, int tileRows) {
        return Math.min(assignments, (assignments + tileRows - 1) / tileRows + Math.min(experts, assignments));
    }

    /** Blocks of moe_grouped_gate_up: a block per tile and 64 intermediate columns. */
    static int groupedGateUpBlocks(int maxTiles, int inter) {
        return maxTiles * ((inter + GROUP_GATE_UP_COLS - 1) / GROUP_GATE_UP_COLS);
    }

    /** Blocks of moe_grouped_down: a block per tile and 128 output columns. */
    static int groupedDownBlocks(int maxTiles, int hidden) {
        return maxTiles * ((hidden + GROUP_DOWN_COLS - 1) / GROUP_DOWN_COLS);
    }

    private static double meanRows(int rows, int topK, int experts) {
        return (double) rows * topK / experts;
    }
}
