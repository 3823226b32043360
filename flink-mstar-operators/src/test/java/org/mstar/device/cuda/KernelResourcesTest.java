package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

/** The kernels jar on the classpath carries a real fatbin and the cuBLAS shim (no GPU needed to check). */
class KernelResourcesTest {
    /** First word of a CUDA fatbin container. */
    private static final int FATBIN_MAGIC = 0xBA55ED50;

    private static byte[] resource(String name) throws IOException {
        try (InputStream in = KernelResourcesTest.class.getClassLoader().getResourceAsStream(name)) {
            assertThat(in).as(name + " on the classpath").isNotNull();
            return in.readAllBytes();
        }
    }

    @Test
    void fatbinIsThere() throws IOException {
        byte[] fatbin = resource(KernelModule.RESOURCE);
        assertThat(ByteBuffer.wrap(fatbin).order(ByteOrder.LITTLE_ENDIAN).getInt()).isEqualTo(FATBIN_MAGIC);
    }

    @Test
    void cublasShimIsAnElfLibrary() throws IOException {
        byte[] shim = resource(Cublas.SHIM_RESOURCE);
        assertThat(shim).startsWith(0x7F, 'E', 'L', 'F');
    }
}
