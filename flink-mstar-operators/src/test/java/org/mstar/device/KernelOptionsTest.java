package org.mstar.device;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import net.jqwik.api.Assume;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

class KernelOptionsTest {

    @Test
    void defaultsAreTheVariantsDevicesAlwaysStartedWith() {
        assertThat(KernelOptions.defaults()).isEqualTo(new KernelOptions(true, true, true,
                KernelOptions.DEFAULT_SKINNY_MATMUL_ROWS, KernelOptions.DEFAULT_MOE_GEMM_EXPERT_ROWS, true, false,
                false));
        assertThat(KernelOptions.DEFAULT_SKINNY_MATMUL_ROWS).isEqualTo(16);
        assertThat(KernelOptions.MAX_SKINNY_MATMUL_ROWS).isEqualTo(32);
    }

    @Property
    void takesEverySkinnyRowCountTheKernelServes(@ForAll @IntRange(min = 0, max = 32) int rows) {
        assertThat(KernelOptions.defaults().withSkinnyMatmulRows(rows).skinnyMatmulRows()).isEqualTo(rows);
    }

    @Property
    void rejectsSkinnyRowCountsBeyondTheKernel(@ForAll int rows) {
        Assume.that(rows < 0 || rows > KernelOptions.MAX_SKINNY_MATMUL_ROWS);
        assertThatThrownBy(() -> KernelOptions.defaults().withSkinnyMatmulRows(rows))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("skinny matmul rows must be 0..32, got " + rows);
    }

    @Property
    void rejectsNegativeMoeGemmExpertRows(@ForAll @IntRange(min = Integer.MIN_VALUE, max = -1) int rows) {
        assertThatThrownBy(() -> KernelOptions.defaults().withMoeGemmExpertRows(rows))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("MoE GEMM rows an expert must be at least 0, got " + rows);
    }

    @Property
    void eachCopyChangesOneSettingOnly(@ForAll boolean tensorCores, @ForAll boolean programmatic,
                                       @ForAll boolean qkvRope, @ForAll @IntRange(min = 0, max = 32) int rows,
                                       @ForAll @IntRange(min = 1, max = 4096) int moeRows, @ForAll boolean warpgroup,
                                       @ForAll boolean attention, @ForAll boolean invariant) {
        KernelOptions o = new KernelOptions(tensorCores, programmatic, qkvRope, rows, moeRows, warpgroup, attention,
                invariant);
        assertThat(o.withTensorCorePrefill(!tensorCores)).isEqualTo(new KernelOptions(!tensorCores, programmatic,
                qkvRope, rows, moeRows, warpgroup, attention, invariant));
        assertThat(o.withProgrammaticLaunch(!programmatic)).isEqualTo(new KernelOptions(tensorCores, !programmatic,
                qkvRope, rows, moeRows, warpgroup, attention, invariant));
        assertThat(o.withQkvRopeInMatmul(!qkvRope)).isEqualTo(new KernelOptions(tensorCores, programmatic,
                !qkvRope, rows, moeRows, warpgroup, attention, invariant));
        assertThat(o.withSkinnyMatmulRows(32 - rows)).isEqualTo(new KernelOptions(tensorCores, programmatic,
                qkvRope, 32 - rows, moeRows, warpgroup, attention, invariant));
        assertThat(o.withMoeGemmExpertRows(moeRows + 1)).isEqualTo(new KernelOptions(tensorCores, programmatic,
                qkvRope, rows, moeRows + 1, warpgroup, attention, invariant));
        assertThat(o.withWarpgroupMoe(!warpgroup)).isEqualTo(new KernelOptions(tensorCores, programmatic,
                qkvRope, rows, moeRows, !warpgroup, attention, invariant));
        assertThat(o.withWarpgroupAttention(!attention)).isEqualTo(new KernelOptions(tensorCores, programmatic,
                qkvRope, rows, moeRows, warpgroup, !attention, invariant));
        assertThat(o.withBatchInvariant(!invariant)).isEqualTo(new KernelOptions(tensorCores, programmatic,
                qkvRope, rows, moeRows, warpgroup, attention, !invariant));
    }
}
