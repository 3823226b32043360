package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** How the decode launcher cuts sequences into slices (no GPU needed to check). */
class DecodeSplitsTest {
    private static final int H200_SMS = 132;
    private static final int BLOCKS_PER_SM = CudaAttention.DECODE_BLOCKS_PER_SM;

    @Test
    void oneLongSequenceSpreadsOverTheWholeGpu() {
        // Llama-3-8B: 8 KV heads, one block each; 16k keys
        int splits = CudaAttention.decodeSplits(1, 8, 16384, H200_SMS, BLOCKS_PER_SM);
        assertThat(splits).isEqualTo(66);
        assertThat(8L * splits).isBetween(BLOCKS_PER_SM * H200_SMS - 7L, (long) BLOCKS_PER_SM * H200_SMS);
    }

    @Test
    void aLargeBatchIsNotSplit() {
        assertThat(CudaAttention.decodeSplits(256, 8, 512, H200_SMS, BLOCKS_PER_SM)).isEqualTo(1);
        assertThat(CudaAttention.decodeSplits(64, 8, 4096, H200_SMS, BLOCKS_PER_SM)).isEqualTo(1);
    }

    @Test
    void splitsStopShortOfASecondWave() {
        // 16 x 8 blocks, 528 resident: 4 splits fill one wave, 5 would leave 112 blocks for a second
        assertThat(CudaAttention.decodeSplits(16, 8, 4096, H200_SMS, BLOCKS_PER_SM)).isEqualTo(4);
        assertThat(16L * 8 * 4).isLessThanOrEqualTo(BLOCKS_PER_SM * H200_SMS);
    }

    @Test
    void fewerResidentBlocksMeanFewerSplits() {
        // blocks of 3 per SM (396 on the GPU)
        assertThat(CudaAttention.decodeSplits(1, 8, 16384, H200_SMS, 3)).isEqualTo(49);
        assertThat(CudaAttention.gridWidth(1, 5, 2048, H200_SMS, 3)).isEqualTo(1);
    }

    @Test
    void shortSequencesAreNotCutIntoSlivers() {
        assertThat(CudaAttention.decodeSplits(1, 8, 300, H200_SMS, BLOCKS_PER_SM)).isEqualTo(3);
        assertThat(CudaAttention.decodeSplits(1, 8, 1, H200_SMS, BLOCKS_PER_SM)).isEqualTo(1);
        assertThat(CudaAttention.decodeSplits(3, 8, 0, H200_SMS, BLOCKS_PER_SM)).isEqualTo(1);
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
        assertThat(CudaAttention.gridWidth(1, 5, 2048, H200_SMS, BLOCKS_PER_SM)).isEqualTo(2);
        assertThat(CudaAttention.gridWidth(1, 1, 2048, H200_SMS, BLOCKS_PER_SM)).isEqualTo(1);
        // one row: every slice its own block
        assertThat(CudaAttention.gridWidth(66, 66, 8, H200_SMS, BLOCKS_PER_SM)).isEqualTo(66);
        assertThat(CudaAttention.gridWidth(66, 512, 8, H200_SMS, BLOCKS_PER_SM)).isEqualTo(264);
    }

    @Test
    void theLauncherAndTheKernelAgreeOnTheSliceLimitsAndTheTensorCoreShape() throws IOException {
        String kernel = Files.readString(Path.of("../kernels/src/main/cuda/attention_decode.cu"));
        assertThat(kernel).contains("constexpr int kMinSplitKeys = " + CudaAttention.MIN_SPLIT_KEYS + ";")
                .contains("constexpr int kMaxSliceKeys = " + CudaAttention.MAX_SLICE_KEYS + ";")
                .contains("constexpr int kSplitPages = " + CudaAttention.SPLIT_PAGES + ";")
                .contains("constexpr int kTcDecodeWarps = " + CudaAttention.TC_DECODE_WARPS + ";")
                .contains("constexpr int kTcDecodeKeys = " + CudaAttention.TC_DECODE_KEYS + ";")
                .contains("constexpr int kTcDecodeStages = " + CudaAttention.TC_DECODE_STAGES + ";");
        for (int d : CudaAttention.TC_DECODE_HEAD_DIMS) {
            assertThat(kernel).contains("MSTAR_DECODE_TC_GROUPS(" + d + ")");
        }
    }

    @Test
    void bf16SlicesRunOnTheTensorCoresAtHeadDims64And128() {
        assertThat(CudaAttention.decodeKernel("bf16", 128, 4)).isEqualTo("attn_decode_tc_bf16_d128_g4");
        assertThat(CudaAttention.decodeKernel("bf16", 64, 8)).isEqualTo("attn_decode_tc_bf16_d64_g8");
        assertThat(CudaAttention.decodeKernel("bf16", 256, 2)).isEqualTo("attn_decode_bf16_d256_g2");
        assertThat(CudaAttention.decodeKernel("bf16", 32, 2)).isEqualTo("attn_decode_bf16_d32_g2");
        assertThat(CudaAttention.decodeKernel("f32", 128, 4)).isEqualTo("attn_decode_f32_d128_g4");
    }

    @Test
    void fp8PoolsDecodeOnTheCudaCoresAtMostFourHeadsABlock() throws IOException {
        assertThat(CudaAttention.decodeKernel("e4m3", 128, CudaAttention.decodeHeads("e4m3", 8)))
                .isEqualTo("attn_decode_e4m3_d128_g4");
        assertThat(CudaAttention.decodeHeads("e4m3", 2)).isEqualTo(2);
        assertThat(CudaAttention.decodeHeads("bf16", 8)).isEqualTo(8);
        assertThat(CudaAttention.decodeHeads("bf16", 6)).isEqualTo(2);
        String decode = Files.readString(Path.of("../kernels/src/main/cuda/attention_decode.cu"));
        String prefill = Files.readString(Path.of("../kernels/src/main/cuda/attention_prefill.cu"));
        for (int d : CudaAttention.SIMT_HEAD_DIMS) {
            assertThat(decode).contains("MSTAR_DECODE_E4M3_GROUPS(" + d + ")");
            assertThat(prefill).contains("MSTAR_PREFILL(attn_prefill_e4m3_d" + d + ", __nv_bfloat16, E4m3, " + d + ")");
        }
        assertThat(decode).contains("MSTAR_DECODE(attn_decode_e4m3_d##D##_g" + CudaAttention.FP8_DECODE_MAX_HEADS)
                .doesNotContain("attn_decode_e4m3_d##D##_g" + 2 * CudaAttention.FP8_DECODE_MAX_HEADS);
    }

    @Test
    void tensorCoreBlocksStageTwoChunksOfSixteenPaddedRowsPerWarp() {
        // 3 warps x 2 stages x (K + V) x 16 rows x (128 + 8) bf16
        assertThat(CudaAttention.tcDecodeSmemBytes(128)).isEqualTo(52224);
        assertThat(CudaAttention.tcDecodeSmemBytes(64)).isEqualTo(27648);
    }
}
