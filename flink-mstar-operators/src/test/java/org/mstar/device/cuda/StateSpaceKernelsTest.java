package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The Mamba2 launchers agree with mamba2.cu's blocks and pick the scan and the step that hold the state (no GPU
 * needed).
 */
class StateSpaceKernelsTest {
    @Test
    void theLauncherAndTheKernelsAgreeOnTheirBlocks() throws IOException {
        String kernels = Files.readString(Path.of("../kernels/src/main/cuda/mamba2.cu"));
        assertThat(kernels).contains("constexpr int kConvThreads = " + CudaStateSpace.CONV_THREADS + ";")
                .contains("constexpr int kConvRuns = " + CudaStateSpace.CONV_RUNS + ";")
                .contains("constexpr int kSsdChannels = " + CudaStateSpace.SCAN_CHANNELS + ";")
                .contains("constexpr int kSsdWarpStates = " + CudaStateSpace.SCAN_WARP_STATES + ";")
                .contains("return 32 * (kSsdChannels / 16) * (nmax / kSsdWarpStates);")
                .contains("constexpr int kSsdPieceTokens = " + CudaStateSpace.PIECE_TOKENS + ";")
                .contains("constexpr int kStepThreads = " + CudaStateSpace.STEP_THREADS + ";")
                .contains("constexpr int kNormThreads = " + CudaStateSpace.NORM_THREADS + ";");
        for (int n : new int[] {64, 128, 256}) {
            assertThat(kernels).contains("MSTAR_SSD_SCAN(" + n + ",").contains("MSTAR_SSM_STEP(" + n + ",");
        }
    }

    @Test
    void decodeRowsGiveTheConvOneRunAndPrefillEight() {
        assertThat(CudaStateSpace.convRuns(64, 64)).isEqualTo(1);
        assertThat(CudaStateSpace.convRuns(3, 4)).isEqualTo(1); // a segment of no tokens beside decode rows
        assertThat(CudaStateSpace.convRuns(2048, 1)).isEqualTo(8);
        assertThat(CudaStateSpace.convRuns(65, 64)).isEqualTo(8);
    }

    @Test
    void theScanAndTheStepAreTheSmallestInstantiationsHoldingTheState() {
        assertThat(CudaStateSpace.scanKernel(16)).isEqualTo("mamba_ssd_scan_n64");
        assertThat(CudaStateSpace.scanKernel(64)).isEqualTo("mamba_ssd_scan_n64");
        assertThat(CudaStateSpace.scanKernel(65)).isEqualTo("mamba_ssd_scan_n128");
        assertThat(CudaStateSpace.scanKernel(128)).isEqualTo("mamba_ssd_scan_n128");
        assertThat(CudaStateSpace.scanKernel(256)).isEqualTo("mamba_ssd_scan_n256");
        assertThat(CudaStateSpace.scanThreads(48)).isEqualTo(128);
        assertThat(CudaStateSpace.scanThreads(128)).isEqualTo(256);
        assertThat(CudaStateSpace.scanThreads(200)).isEqualTo(512);
        assertThat(CudaStateSpace.stepKernel(48)).isEqualTo("mamba_ssm_step_n64");
        assertThat(CudaStateSpace.stepKernel(128)).isEqualTo("mamba_ssm_step_n128");
        assertThat(CudaStateSpace.stepKernel(200)).isEqualTo("mamba_ssm_step_n256");
    }

    @Test
    void aSmallDecodeBatchSplitsItsHeadsUntilTheSmsAreFull() {
        assertThat(CudaStateSpace.stepSplits(128, 64, 132)).isEqualTo(8); // one row of Bamba-9B: a channel a warp
        assertThat(CudaStateSpace.stepSplits(512, 64, 132)).isEqualTo(3);
        assertThat(CudaStateSpace.stepSplits(64 * 128, 64, 132)).isEqualTo(1);
        assertThat(CudaStateSpace.stepSplits(4, 16, 132)).isEqualTo(2); // never past a channel a warp
    }

    @Test
    void thePieceBoundsOfOnePromptAndOfDecodeRows() {
        // one prompt of 2048: eight pieces, seven of them not last, one segment longer than a piece
        assertThat(CudaStateSpace.ScanPieces.of(2048, 1)).isEqualTo(new CudaStateSpace.ScanPieces(9, 7, 7));
        // 64 decode rows: a piece each, none spans two
        assertThat(CudaStateSpace.ScanPieces.of(64, 64)).isEqualTo(new CudaStateSpace.ScanPieces(65, 0, 0));
        // a prompt of exactly one piece spans no second
        assertThat(CudaStateSpace.ScanPieces.of(256, 1).innerPieces()).isZero();
        assertThat(CudaStateSpace.ScanPieces.of(257, 1).workSlots()).isEqualTo(2);
    }
}
