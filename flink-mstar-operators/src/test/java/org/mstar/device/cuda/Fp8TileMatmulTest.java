package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** How the FP8 tile launcher splits K (no GPU needed to check). */
class Fp8TileMatmulTest {
    private static final int H200_SMS = 132;

    private static int blocks(int n, int k) {
        return (n + Fp8TileMatmul.COLUMNS - 1) / Fp8TileMatmul.COLUMNS * Fp8TileMatmul.splits(n, k, H200_SMS);
    }

    @Test
    void llama8bProjectionsKeepEverySmBusyInOneRound() {
        // o (4096 x 4096), qkv (6144 x 4096), down (4096 x 14336): 32 or 48 column blocks, split to two an SM
        assertThat(Fp8TileMatmul.splits(4096, 4096, H200_SMS)).isEqualTo(8);
        assertThat(Fp8TileMatmul.splits(6144, 4096, H200_SMS)).isEqualTo(5);
        assertThat(Fp8TileMatmul.splits(4096, 14336, H200_SMS)).isEqualTo(8);
        for (int[] shape : new int[][] {{4096, 4096}, {6144, 4096}, {4096, 14336}, {28672, 4096}}) {
            assertThat(blocks(shape[0], shape[1])).as("blocks of %dx%d", shape[0], shape[1])
                    .isBetween(H200_SMS, 2 * H200_SMS);
        }
    }

    @Test
    void aWideWeightIsNotSplit() {
        // gate/up (28672 x 4096): 224 column blocks already fill the GPU
        assertThat(Fp8TileMatmul.splits(28672, 4096, H200_SMS)).isEqualTo(1);
        assertThat(Fp8TileMatmul.splits(128256, 4096, H200_SMS)).isEqualTo(1);
    }

    @Test
    void aShortKKeepsFourChunksASlice() {
        assertThat(Fp8TileMatmul.splits(128, 512, H200_SMS)).isEqualTo(2);
        assertThat(Fp8TileMatmul.splits(128, 192, H200_SMS)).isEqualTo(1);
    }

    @Test
    void theLauncherAgreesWithTheKernel() throws IOException {
        String kernel = Files.readString(Path.of("../kernels/src/main/cuda/fp8_tile_matmul.cu"));
        assertThat(kernel).contains("constexpr int kTileWarps = " + Fp8TileMatmul.WARPS + ";")
                .contains("constexpr int kTileRows = 32 * kTileWarps;")
                .contains("constexpr int kTileChunk = " + Fp8TileMatmul.CHUNK + ";")
                .contains("constexpr int kTileStages = " + Fp8TileMatmul.STAGES + ";")
                .contains("constexpr int kTileXPitch = 2 * kTileChunk + 16;")
                .contains("MSTAR_FP8_TILE_KERNEL(fp8_tile_matmul_m4, 4)")
                .contains("MSTAR_FP8_TILE_KERNEL(fp8_tile_matmul_m8, 8)");
    }
}
