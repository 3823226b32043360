package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** How the decode launcher cuts sequences into slices (no GPU needed to check). */
class DecodeSplitsTest {
    private static final int H200_SMS = 132;

    @Test
    void oneLongSequenceSpreadsOverTheWholeGpu() {
        // Llama-3-8B: 8 KV heads, one block each; 16k keys
        int splits = CudaAttention.decodeSplits(1, 8, 16384, H200_SMS);
        assertThat(splits).isEqualTo(66);
        assertThat(8L * splits).isGreaterThanOrEqualTo(CudaAttention.DECODE_BLOCKS_PER_SM * H200_SMS);
    }

    @Test
    void aLargeBatchIsNotSplit() {
        assertThat(CudaAttention.decodeSplits(256, 8, 512, H200_SMS)).isEqualTo(1);
        assertThat(CudaAttention.decodeSplits(64, 8, 4096, H200_SMS)).isEqualTo(2);
    }

    @Test
    void shortSequencesAreNotCutIntoSlivers() {
        assertThat(CudaAttention.decodeSplits(1, 8, 300, H200_SMS)).isEqualTo(3);
        assertThat(CudaAttention.decodeSplits(1, 8, 1, H200_SMS)).isEqualTo(1);
        assertThat(CudaAttention.decodeSplits(3, 8, 0, H200_SMS)).isEqualTo(1);
    }

    @Test
    void slicesOutgrowTheSplitsOnlyPastTheLongestSlice() {
        assertThat(CudaAttention.maxSlices(66, 16384, 16)).isEqualTo(66);
        assertThat(CudaAttention.maxSlices(1, 2048, 16)).isEqualTo(1);
        assertThat(CudaAttention.maxSlices(1, 2049, 16)).isEqualTo(2);
        assertThat(CudaAttention.maxSlices(1, 9000, 16)).isEqualTo(5);
        // a one-token page table holds 511 keys
        assertThat(CudaAttention.maxSlices(1, 9000, 1)).isEqualTo(18);
    }

    @Test
    void extraSlicesGetAtMostFourWavesOfBlocks() {
        // 256 rows x 8 KV heads, one 9000-key sequence: 5 slices, walked by 2 blocks
        assertThat(CudaAttention.gridWidth(1, 5, 2048, H200_SMS)).isEqualTo(2);
        assertThat(CudaAttention.gridWidth(1, 1, 2048, H200_SMS)).isEqualTo(1);
        // one row: every slice its own block
        assertThat(CudaAttention.gridWidth(66, 66, 8, H200_SMS)).isEqualTo(66);
        assertThat(CudaAttention.gridWidth(66, 512, 8, H200_SMS)).isEqualTo(264);
    }

    @Test
    void theLauncherAndTheKernelAgreeOnTheSliceLimits() throws IOException {
        String kernel = Files.readString(Path.of("../kernels/src/main/cuda/attention_decode.cu"));
        assertThat(kernel).contains("constexpr int kMinSplitKeys = " + CudaAttention.MIN_SPLIT_KEYS + ";")
                .contains("constexpr int kMaxSliceKeys = " + CudaAttention.MAX_SLICE_KEYS + ";")
                .contains("constexpr int kSplitPages = " + CudaAttention.SPLIT_PAGES + ";");
    }
}
