package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** Which FP8 skinny kernel takes a few rows (no GPU needed to check). */
class CudaFp8MatmulTest {
    private static final int H200_SMS = 132;

    @Test
    void onlyWeightsOfManyBlocksTakeTwoTilesABlock() {
        // Llama-3-8B: gate/up (28672 rows) and an LM head make 896 and 4008 blocks of 32 rows; qkv and o fewer than
        // two an SM
        assertThat(CudaFp8Matmul.twoTiles(28672, H200_SMS)).isTrue();
        assertThat(CudaFp8Matmul.twoTiles(128256, H200_SMS)).isTrue();
        assertThat(CudaFp8Matmul.twoTiles(6144, H200_SMS)).isFalse();
        assertThat(CudaFp8Matmul.twoTiles(4096, H200_SMS)).isFalse();
        assertThat(CudaFp8Matmul.twoTiles(32 * 2 * H200_SMS, H200_SMS)).isTrue();
        assertThat(CudaFp8Matmul.twoTiles(32 * 2 * H200_SMS - 32, H200_SMS)).isFalse();
    }

    @Test
    void everyKernelTheLauncherNamesIsBuilt() throws IOException {
        String kernel = Files.readString(Path.of("../kernels/src/main/cuda/fp8_matmul.cu"));
        for (String name : new String[] {"fp8_skinny_matmul_m1", "fp8_skinny_matmul_m2", "fp8_skinny_matmul_m1_r2",
            "fp8_skinny_matmul_m2_r2"}) {
            assertThat(kernel).contains("MSTAR_FP8_SKINNY_KERNEL(" + name + ",");
        }
    }
}
