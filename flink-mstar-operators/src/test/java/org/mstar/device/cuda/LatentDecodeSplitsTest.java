package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** How the latent (MLA) launcher cuts query rows' keys into slices, and that it agrees with the kernel (no GPU needed). */
class LatentDecodeSplitsTest {
    private static final int SMS = 132;
    /** Two blocks of latent_attention_mma's 96 KB of shared memory share an SM. */
    private static final int BLOCKS_PER_SM = 2;

    @Test
    void oneSequenceSpreadsOverTheGpuInAtMost64SlicesOfAtLeast64Keys() {
        assertThat(CudaLatentAttention.decodeSplits(1, 512, SMS, BLOCKS_PER_SM)).isEqualTo(8);
        assertThat(CudaLatentAttention.decodeSplits(1, 4096, SMS, BLOCKS_PER_SM)).isEqualTo(64);
        assertThat(CudaLatentAttention.decodeSplits(1, 16384, SMS, BLOCKS_PER_SM)).isEqualTo(64);
        assertThat(CudaLatentAttention.decodeSplits(1, 100_000, SMS, BLOCKS_PER_SM)).isEqualTo(64);
        assertThat(CudaLatentAttention.decodeSplits(1, 129, SMS, BLOCKS_PER_SM)).isEqualTo(3);
        assertThat(CudaLatentAttention.decodeSplits(1, 0, SMS, BLOCKS_PER_SM)).isEqualTo(1);
    }

    @Test
    void aBatchFillsOneWaveAndNoMore() {
        assertThat(CudaLatentAttention.decodeSplits(16, 8192, SMS, BLOCKS_PER_SM)).isEqualTo(16);
        assertThat(CudaLatentAttention.decodeSplits(64, 4096, SMS, BLOCKS_PER_SM)).isEqualTo(4);
        assertThat(64L * 4).isLessThanOrEqualTo((long) SMS * BLOCKS_PER_SM);
        assertThat(CudaLatentAttention.decodeSplits(512, 4096, SMS, BLOCKS_PER_SM)).isEqualTo(1);
    }

    @Test
    void theLauncherAndTheKernelAgreeOnTheGeometry() throws IOException {
        String kernel = Files.readString(Path.of("../kernels/src/main/cuda/latent_attention.cu"));
        assertThat(kernel).contains("constexpr int kLdRank = " + CudaLatentAttention.DECODE_RANK + ";")
                .contains("constexpr int kLdWidth = " + CudaLatentAttention.DECODE_WIDTH + ";")
                .contains("constexpr int kLdHeads = " + CudaLatentAttention.DECODE_HEADS + ";")
                .contains("constexpr int kLdMinSliceKeys = " + CudaLatentAttention.DECODE_MIN_SLICE_KEYS + ";")
                .contains("constexpr int kLdWarps = 4;").contains("constexpr int kLdTileKeys = 32;")
                .contains("constexpr int kLdScoreStride = kLdTileKeys + 8;");
        // (16 query rows + 2 stages of 32 latent rows) of 584 bf16, then 16 rows of 40 fp32 scores
        assertThat(CudaLatentAttention.DECODE_SMEM_BYTES).isEqualTo(96_000);
    }
}
