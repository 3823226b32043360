package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

/**
 * A build with nvcc and gcc carries a real fatbin and the CUDA JNI shim (no GPU needed to check); a build without
 * them carries neither, and a CUDA device then refuses to start with one line saying why, before any CUDA call.
 * CI runs both builds.
 */
class KernelResourcesTest {
    /** First word of a CUDA fatbin container. */
    private static final int FATBIN_MAGIC = 0xBA55ED50;

    private static byte[] resource(String name) throws IOException {
        try (InputStream in = KernelResourcesTest.class.getClassLoader().getResourceAsStream(name)) {
            return in == null ? null : in.readAllBytes();
        }
    }

    @Test
    void theKernelsAreThereOrACudaDeviceRefusesToStartSayingSo() throws IOException {
        byte[] fatbin = resource(KernelModule.RESOURCE);
        if (fatbin != null) {
            assertThat(ByteBuffer.wrap(fatbin).order(ByteOrder.LITTLE_ENDIAN).getInt()).isEqualTo(FATBIN_MAGIC);
            assertThat(resource(NativeShim.RESOURCE)).as("the CUDA JNI shim beside the kernels")
                    .isNotNull().startsWith(0x7F, 'E', 'L', 'F');
        } else {
            assertThatThrownBy(() -> new CudaDevice(0)).isInstanceOf(IllegalStateException.class)
                    .hasMessage(KernelModule.NO_KERNELS);
        }
    }
}
