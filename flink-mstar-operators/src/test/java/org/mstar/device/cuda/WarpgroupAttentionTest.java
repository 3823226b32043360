package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

class WarpgroupAttentionTest {
    /** Most dynamic shared memory a block may take on sm_90. */
    private static final int SM90_MAX_SMEM = 227 * 1024;

    @Test
    void theLauncherAgreesWithTheKernel() throws IOException {
        String kernel = Files.readString(Path.of("../kernels/src/main/cuda/attention_prefill_wgmma.cu"));
        assertThat(kernel).contains("static constexpr int THREADS = " + WarpgroupAttention.THREADS + ";")
                .contains("static constexpr int ROWS = " + WarpgroupAttention.ROWS + ";")
                .contains("using WgmmaPrefillShape = WgmmaShape<D, D <= 128 ? 128 : 64, 2>;")
                .contains("static constexpr int SMEM_BYTES = Q_BYTES + 2 * STAGES * TILE_BYTES + 1024;")
                .contains("__launch_bounds__(256, 1) attn_prefill_wgmma_bf16_d128(");
        for (int d : WarpgroupAttention.RAGGED_HEAD_DIMS) {
            assertThat(kernel).contains("MSTAR_RAGGED_WGMMA(" + d + ")");
        }
        assertThat(WarpgroupAttention.PAGED_HEAD_DIMS).containsExactly(128);
        assertThat(WarpgroupAttention.smemBytes(128)).isEqualTo(128 * 128 * 2 + 4 * 128 * 128 * 2 + 1024);
        assertThat(WarpgroupAttention.smemBytes(192)).isEqualTo(128 * 192 * 2 + 4 * 64 * 192 * 2 + 1024);
    }

    @Test
    void everyHeadDimFitsOneBlockAnSm() {
        for (int d : WarpgroupAttention.RAGGED_HEAD_DIMS) {
            assertThat(WarpgroupAttention.smemBytes(d)).isLessThanOrEqualTo(SM90_MAX_SMEM);
        }
    }

    @Property
    void rowTilesCoverEveryPackedRowOnce(@ForAll @IntRange(min = 0, max = 100_000) int queries,
                                         @ForAll @IntRange(min = 1, max = 16) int group) {
        int tiles = WarpgroupAttention.tiles(queries, group);
        assertThat((long) tiles * WarpgroupAttention.ROWS).isGreaterThanOrEqualTo((long) queries * group);
        assertThat((long) (tiles - 1) * WarpgroupAttention.ROWS).isLessThan(Math.max(1L, (long) queries * group));
    }
}
