package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Devices;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;

/**
 * A CUDA smoke check where a GPU exists; elsewhere (CI, development machines) it is reported as skipped with
 * the reason, never silently green. The full GPU check is the harness (docs/guides/gpu-harness.md).
 */
class CudaDeviceTest {
    private static Device gpu;
    private static String unavailable;

    @BeforeAll
    static void open() {
        try {
            gpu = Devices.open("cuda:0");
        } catch (Throwable e) { // no driver or no libcublas: UnsatisfiedLinkError as well as exceptions
            unavailable = e.toString();
        }
    }

    @AfterAll
    static void close() {
        if (gpu != null) {
            gpu.close();
        }
    }

    private static void requireGpu() {
        assumeTrue(gpu != null, () -> "no CUDA device here (" + unavailable
                + "); GPU checks run in the GPU harness, see docs/guides/gpu-harness.md");
    }

    @Test
    void matmulMatchesTheCpuReference() {
        requireGpu();
        Random rnd = new Random(1);
        float[] x = new float[3 * 64];
        float[] w = new float[32 * 64];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) rnd.nextGaussian();
        }
        for (int i = 0; i < w.length; i++) {
            w[i] = (float) rnd.nextGaussian();
        }
        try (CpuDevice cpu = new CpuDevice(1)) {
            float[] expected = run(cpu, x, w);
            float[] actual = run(gpu, x, w);
            for (int i = 0; i < expected.length; i++) {
                assertThat(actual[i]).isCloseTo(expected[i], org.assertj.core.data.Offset.offset(1e-3f));
            }
        }
    }

    @Test
    void aViewComputesOnItsParentsTensorsAndFreesNothingWhenClosed() {
        requireGpu();
        Device view = gpu.withOptions(gpu.options().withBatchInvariant(true).withSkinnyMatmulRows(0));
        assertThat(view.batchInvariant()).isTrue();
        assertThat(gpu.batchInvariant()).isFalse();
        try (Tensor a = gpu.fromFloats(new float[] {1, 2, 3}, DType.F32, 3); Tensor out = view.allocate(DType.F32, 3)) {
            view.ops().add(a, a, out);
            assertThat(gpu.toFloats(out)).containsExactly(2, 4, 6);
        }
        view.close();
        try (Tensor t = gpu.fromFloats(new float[] {5}, DType.F32, 1)) {
            assertThat(gpu.toFloats(t)).containsExactly(5);
        }
    }

    private static float[] run(Device d, float[] x, float[] w) {
        try (Tensor xt = d.fromFloats(x, DType.F32, 3, 64); Tensor wt = d.fromFloats(w, DType.F32, 32, 64);
             Tensor out = d.allocate(DType.F32, 3, 32)) {
            d.ops().matmul(xt, wt, null, out);
            return d.toFloats(out);
        }
    }
}
