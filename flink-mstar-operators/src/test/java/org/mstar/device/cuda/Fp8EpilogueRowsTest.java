package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/** How the W8A8 FP8 GEMM slices a product's rows to fit its fp32 scratch (no GPU needed). */
class Fp8EpilogueRowsTest {

    @Test
    void llamaShapesFitTheScratchInSlicesOfSixteenRows() {
        assertThat(CudaFp8Matmul.epilogueRows(8192, 28672)).isEqualTo(2336);
        assertThat(CudaFp8Matmul.epilogueRows(8192, 128256)).isEqualTo(512);
        assertThat(CudaFp8Matmul.epilogueRows(2048, 6144)).isEqualTo(2048);
        assertThat(CudaFp8Matmul.epilogueRows(100, 1024)).isEqualTo(100);
    }

    @Property
    void aSliceFitsTheScratchAndCoversTheRowsInFewSlices(@ForAll @IntRange(min = 1, max = 65536) int m,
                                                         @ForAll @IntRange(min = 16, max = 262144) int n) {
        int slice = CudaFp8Matmul.epilogueRows(m, n);
        assertThat(slice).isBetween(1, m);
        assertThat(slice == m || slice % 16 == 0).isTrue();
        assertThat((long) slice * n).isLessThanOrEqualTo(Math.max(CudaFp8Matmul.EPILOGUE_SCRATCH_FLOATS, 16L * n));
    }
}
