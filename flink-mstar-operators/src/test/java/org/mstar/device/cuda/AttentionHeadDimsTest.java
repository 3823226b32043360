package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.mstar.device.UnsupportedOnDeviceException;

/** Head dims without compiled attention kernels are refused by name (no GPU needed to check). */
class AttentionHeadDimsTest {
    @Test
    void compiledHeadDimsPassIncludingTheBundledDemoModels() {
        for (int d : new int[] {32, 64, 128, 256}) {
            assertThatCode(() -> CudaAttention.requireHeadDim(d)).doesNotThrowAnyException();
        }
    }

    @Test
    void otherHeadDimsAreRefusedWithTheCompiledList() {
        assertThatThrownBy(() -> CudaAttention.requireHeadDim(80))
                .isInstanceOf(UnsupportedOnDeviceException.class)
                .hasMessage("attention head dim 80 has no CUDA kernels (compiled: [32, 64, 128, 256])");
    }
}
