package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;

/** Which tensor-core way a MoE call takes and how many tiles its grids are sized for (no GPU needed to check). */
class MoeTilesTest {
    @Test
    void qwen3MoeTakesTheGroupedGemmAbove256Rows() {
        // 128 experts, top 8: 16 assignments an expert at 256 rows
        assertThat(MoeTiles.grouped(256, 8, 128)).isFalse();
        assertThat(MoeTiles.grouped(257, 8, 128)).isTrue();
        assertThat(MoeTiles.tileRows(1, 8, 128)).isEqualTo(8);
        assertThat(MoeTiles.tileRows(64, 8, 128)).isEqualTo(16);
        assertThat(MoeTiles.tileRows(512, 8, 128)).isEqualTo(MoeTiles.GROUP_ROWS);
        assertThat(MoeTiles.tileRows(1024, 8, 128)).isEqualTo(MoeTiles.GROUP_ROWS);
        // past 64 assignments an expert the tiles hold 128
        assertThat(MoeTiles.tileRows(1025, 8, 128)).isEqualTo(MoeTiles.GROUP_LARGE_ROWS);
        assertThat(MoeTiles.tileRows(2048, 8, 128)).isEqualTo(MoeTiles.GROUP_LARGE_ROWS);
    }

    @Test
    void deepSeekV2LiteTakesItFrom171Rows() {
        // 64 experts, top 6
        assertThat(MoeTiles.grouped(170, 6, 64)).isFalse();
        assertThat(MoeTiles.grouped(171, 6, 64)).isTrue();
    }

    @Test
    void qwen3PrefillOf2048RowsLaunchesItsTileBound() {
        // 16384 assignments: 256 full tiles, plus at most one partial tile an expert
        int tiles = MoeTiles.maxTiles(2048 * 8, 128, MoeTiles.GROUP_ROWS);
        assertThat(tiles).isEqualTo(256 + 128);
        assertThat(MoeTiles.maxTiles(2048 * 8, 128, MoeTiles.GROUP_LARGE_ROWS)).isEqualTo(128 + 128);
        assertThat(MoeTiles.groupedGateUpBlocks(tiles, 768)).isEqualTo(tiles * 12);
        assertThat(MoeTiles.groupedDownBlocks(tiles, 2048)).isEqualTo(tiles * 16);
        // DeepSeek-V2-Lite's width 1408: 22 blocks of 64 columns; a hidden size not a multiple of 128 rounds up
        assertThat(MoeTiles.groupedGateUpBlocks(1, 1408)).isEqualTo(22);
        assertThat(MoeTiles.groupedDownBlocks(1, 192)).isEqualTo(2);
    }

    @Test
    void theWarpgroupGemmServesAbove64RowChoicesAnExpert() {
        // Qwen3-30B-A3B: 128 experts, top 8; DeepSeek-V2-Lite: 64, top 6
        assertThat(MoeTiles.warpgroup(1024, 8, 128)).isFalse();
        assertThat(MoeTiles.warpgroup(1025, 8, 128)).isTrue();
        assertThat(MoeTiles.warpgroup(682, 6, 64)).isFalse();
        assertThat(MoeTiles.warpgroup(683, 6, 64)).isTrue();
        // its blocks: 128 intermediate columns (256 weight rows) for gate/up, 256 output columns for down, rounded up
        int tiles = MoeTiles.maxTiles(2048 * 8, 128, MoeTiles.WARPGROUP_ROWS);
        assertThat(tiles).isEqualTo(128 + 128);
        assertThat(MoeTiles.warpgroupGateUpBlocks(tiles, 768)).isEqualTo(tiles * 6);
        assertThat(MoeTiles.warpgroupDownBlocks(tiles, 2048)).isEqualTo(tiles * 8);
        assertThat(MoeTiles.warpgroupGateUpBlocks(1, 1408)).isEqualTo(11);
        assertThat(MoeTiles.warpgroupDownBlocks(1, 320)).isEqualTo(2);
    }

    /** However the assignments fall on the experts, moe_sort lists no more tiles than the grid holds. */
    @Property
    void noRoutingListsMoreTilesThanTheBound(@ForAll @IntRange(min = 1, max = 3000) int assignments,
                                             @ForAll @IntRange(min = 1, max = 160) int experts,
                                             @ForAll @IntRange(min = 0, max = 1000) int skew) {
        int[] counts = new int[experts];
        // a skewed deal: expert e gets about skew/1000 of what is left
        int left = assignments;
        for (int e = 0; e < experts - 1 && left > 0; e++) {
            counts[e] = (int) ((long) left * skew / 1000);
            left -= counts[e];
        }
        counts[experts - 1] += left;
        for (int tileRows : new int[] {8, 16, MoeTiles.GROUP_ROWS, MoeTiles.GROUP_LARGE_ROWS}) {
            int tiles = 0;
            for (int n : counts) {
                tiles += (n + tileRows - 1) / tileRows;
            }
            assertThat(tiles).isLessThanOrEqualTo(MoeTiles.maxTiles(assignments, experts, tileRows));
        }
    }

    @Test
    void theLauncherAgreesWithTheKernel() throws IOException {
        String kernel = Files.readString(Path.of("../kernels/src/main/cuda/moe.cu"));
        assertThat(kernel).contains("constexpr int kMoeGroupRows = " + MoeTiles.GROUP_ROWS + ";")
                .contains("constexpr int kMoeGroupCols = " + MoeTiles.GROUP_DOWN_COLS + ";")
                .contains("constexpr int kMoeGroupChunk = 64;")
                .contains("constexpr int kMoeGroupStages = 3;")
                .contains("constexpr int kMoeGroupLargeRows = " + MoeTiles.GROUP_LARGE_ROWS + ";")
                .contains("constexpr int kMoeGroupThreads = 2 * kMoeGroupRows;")
                .contains("constexpr int kMoeGroupLargeThreads = 2 * kMoeGroupLargeRows;")
                .contains("MSTAR_MOE_GROUPED_KERNELS(_m128, kMoeGroupLargeRows, kMoeGroupLargeThreads, 2)")
                .contains("constexpr int kMoeGroupPitch = 2 * kMoeGroupChunk + 16;")
                .contains("GateUp ? kMoeGroupCols / 2 : kMoeGroupCols");
        assertThat(MoeTiles.GROUP_GATE_UP_COLS).isEqualTo(MoeTiles.GROUP_DOWN_COLS / 2);
        // the elementwise passes' items: a thread's run of outputs (combines) and piece of a row (gather)
        assertThat(kernel).contains("constexpr int kMoeCombineRun = 4;")
                .contains("return hidden % kMoeCombineRun == 0 ? kMoeCombineRun : 1;")
                .contains("return (xDt == DT_BF16 || xDt == DT_F16) && hidden % 8 == 0 ? 8 : xDt == DT_F32 && hidden % 4 == 0 ? 4 : 1;");
        assertThat(CudaMoe.combineRun(2048)).isEqualTo(4);
        assertThat(CudaMoe.combineRun(65)).isEqualTo(1);
        assertThat(CudaMoe.gatherPiece(DType.BF16, 2048)).isEqualTo(8);
        assertThat(CudaMoe.gatherPiece(DType.BF16, 1412)).isEqualTo(1);
        assertThat(CudaMoe.gatherPiece(DType.F32, 1412)).isEqualTo(4);
        assertThat(MoeTiles.GROUP_THREADS).isEqualTo(2 * MoeTiles.GROUP_ROWS);
        assertThat(MoeTiles.GROUP_LARGE_THREADS).isEqualTo(2 * MoeTiles.GROUP_LARGE_ROWS);
        assertThat(MoeTiles.GROUP_SMEM_BYTES).isEqualTo(3 * (64 + 128) * (2 * 64 + 16));
        assertThat(MoeTiles.GROUP_LARGE_SMEM_BYTES).isEqualTo(3 * (128 + 128) * (2 * 64 + 16));
        // the warpgroup GEMM: tile rows, weight rows, threads and shared memory as moe_wgmma_* take them
        assertThat(kernel).contains("constexpr int kMoeWgRows = " + MoeTiles.WARPGROUP_ROWS + ";")
                .contains("constexpr int kMoeWgCols = " + MoeTiles.WARPGROUP_COLS + ";")
                .contains("constexpr int kMoeWgThreads = " + MoeTiles.WARPGROUP_THREADS + ";")
                .contains("constexpr int kMoeWgStages = 4;")
                .contains("constexpr int kMoeWgStageBytes = (kMoeWgRows + kMoeWgCols) * 128;")
                .contains("constexpr int kMoeWgSmemBytes = kMoeWgStages * kMoeWgStageBytes + 1024;");
        assertThat(MoeTiles.WARPGROUP_SMEM_BYTES).isEqualTo(4 * (128 + 256) * 128 + 1024);
    }
}
