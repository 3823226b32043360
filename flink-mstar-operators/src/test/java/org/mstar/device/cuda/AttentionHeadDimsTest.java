package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.UnsupportedOnDeviceException;

/** Head dims without compiled attention kernels are refused by name (no GPU needed to check). */
class AttentionHeadDimsTest {
    @Test
    void compiledHeadDimsPassIncludingTheBundledDemoModels() {
        for (int d : new int[] {32, 64, 128, 256}) {
            assertThatCode(() -> CudaAttention.requireHeadDim(d, DType.F32)).doesNotThrowAnyException();
            assertThatCode(() -> CudaAttention.requireHeadDim(d, DType.BF16)).doesNotThrowAnyException();
        }
        for (int d : new int[] {80, 96}) {
            assertThatCode(() -> CudaAttention.requireHeadDim(d, DType.BF16)).doesNotThrowAnyException();
        }
    }

    @Test
    void otherHeadDimsAreRefusedWithTheCompiledLists() {
        assertThatThrownBy(() -> CudaAttention.requireHeadDim(80, DType.F32))
                .isInstanceOf(UnsupportedOnDeviceException.class)
                .hasMessage("attention head dim 80 has no CUDA kernels for F32 (bf16: [32, 64, 80, 96, 128, 256];"
                        + " fp32 and FP8 KV: [32, 64, 128, 256])");
        assertThatThrownBy(() -> CudaAttention.requireHeadDim(48, DType.BF16))
                .isInstanceOf(UnsupportedOnDeviceException.class)
                .hasMessageStartingWith("attention head dim 48 has no CUDA kernels for BF16");
    }

    @Test
    void raggedAttentionRunsEveryCompiledHeadDimAndRefusesTheRest() {
        for (int d : new int[] {32, 64, 128, 256}) {
            assertThatCode(() -> CudaRaggedAttention.requireHeadDim(d, DType.F32)).doesNotThrowAnyException();
            assertThatCode(() -> CudaRaggedAttention.requireHeadDim(d, DType.BF16)).doesNotThrowAnyException();
        }
        for (int d : new int[] {80, 96, 192}) {
            assertThatCode(() -> CudaRaggedAttention.requireHeadDim(d, DType.BF16)).doesNotThrowAnyException();
            assertThatThrownBy(() -> CudaRaggedAttention.requireHeadDim(d, DType.F32))
                    .isInstanceOf(UnsupportedOnDeviceException.class)
                    .hasMessageStartingWith("ragged attention head dim " + d + " in F32 has no CUDA kernel");
        }
        assertThatThrownBy(() -> CudaRaggedAttention.requireHeadDim(48, DType.BF16))
                .isInstanceOf(UnsupportedOnDeviceException.class).hasMessageContaining("bf16: [32, 64, 128, 256] and");
    }
}
