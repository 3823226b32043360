package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Random;
import org.junit.jupiter.api.Test;
import org.mstar.device.ByteRanges;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Devices;
import org.mstar.device.KernelOptions;
import org.mstar.device.Tensor;

/** Views of a CPU device: other options, the same tensors and ops' threads, nothing freed when one is closed. */
class CpuDeviceViewTest {
    private static final KernelOptions INVARIANT = KernelOptions.defaults().withBatchInvariant(true);

    @Test
    void aViewReportsItsOptionsAndLeavesItsParentsAlone() {
        try (CpuDevice parent = new CpuDevice(1)) {
            CpuDevice view = parent.withOptions(INVARIANT);
            assertThat(view.options().batchInvariant()).isTrue();
            assertThat(parent.options()).isEqualTo(KernelOptions.defaults());
            assertThat(parent.options().batchInvariant()).isFalse();
            // the reference computes every row on its own either way
            assertThat(parent.batchInvariant()).isTrue();
            assertThat(view.batchInvariant()).isTrue();
            assertThat(view.name()).isEqualTo(parent.name());
        }
    }

    @Test
    void aViewIsTheSameDeviceAnotherDeviceIsNotAndCopiesRangesOnlyWithinTheTensors() {
        try (CpuDevice parent = new CpuDevice(1); CpuDevice other = new CpuDevice(1)) {
            assertThat(parent.withOptions(INVARIANT).sameDevice(parent)).isTrue();
            assertThat(parent.sameDevice(parent.withOptions(INVARIANT))).isTrue();
            assertThat(other.sameDevice(parent)).isFalse();
            try (Tensor src = parent.fromFloats(new float[] {1, 2, 3, 4, 5, 6}, DType.F32, 6);
                 Tensor dst = other.zeros(DType.F32, 4)) {
                other.copyFrom(parent, src, dst, new ByteRanges(new long[] {4, 20}, new long[] {0, 12},
                        new long[] {8, 4}));
                assertThat(other.toFloats(dst)).containsExactly(2, 3, 0, 6);
                assertThatThrownBy(() -> other.copyFrom(parent, src, dst, new ByteRanges(new long[] {16},
                        new long[] {8}, new long[] {12}))).isInstanceOf(IllegalArgumentException.class)
                        .hasMessageContaining("does not fit");
                assertThatThrownBy(() -> other.copyFrom(parent, src, dst, new ByteRanges(new long[] {2},
                        new long[] {0}, new long[] {4}))).isInstanceOf(IllegalArgumentException.class);
            }
        }
    }

    @Test
    void aViewIsAlwaysANewDevice() {
        try (CpuDevice parent = new CpuDevice(1)) {
            assertThat(parent.withOptions(parent.options())).isNotSameAs(parent);
        }
    }

    @Test
    void tensorsOfEitherServeTheOpsOfEither() {
        try (CpuDevice parent = new CpuDevice(1)) {
            Device view = parent.withOptions(INVARIANT);
            try (Tensor a = parent.fromFloats(new float[] {1, 2, 3}, DType.F32, 3);
                 Tensor b = view.fromFloats(new float[] {10, 20, 30}, DType.F32, 3);
                 Tensor viaView = view.allocate(DType.F32, 3);
                 Tensor viaParent = parent.allocate(DType.F32, 3)) {
                view.ops().add(a, b, viaView);
                parent.ops().add(b, a, viaParent);
                assertThat(parent.toFloats(viaView)).containsExactly(11, 22, 33);
                assertThat(view.toFloats(viaParent)).containsExactly(11, 22, 33);
                view.copy(viaView, a);
                assertThat(parent.toFloats(a)).containsExactly(11, 22, 33);
            }
        }
    }

    @Test
    void closingAViewLeavesItsParentsThreadsRunning() {
        Random rnd = new Random(3);
        float[] x = OpsTestSupport.randomFloats(rnd, 64 * 256, 1);
        float[] w = OpsTestSupport.randomFloats(rnd, 512 * 256, 1);
        try (CpuDevice parent = new CpuDevice(4); CpuDevice single = new CpuDevice(1)) {
            parent.withOptions(INVARIANT).close();
            assertThat(matmul(parent, x, w)).containsExactly(matmul(single, x, w));
        }
    }

    @Test
    void openedByNameWithOptions() {
        try (Device cpu = Devices.open("cpu", INVARIANT)) {
            assertThat(cpu.options()).isEqualTo(INVARIANT);
        }
    }

    /** A product large enough that the parent's ops spread it over their threads. */
    private static float[] matmul(Device d, float[] x, float[] w) {
        try (Tensor xt = d.fromFloats(x, DType.F32, 64, 256); Tensor wt = d.fromFloats(w, DType.F32, 512, 256);
             Tensor out = d.allocate(DType.F32, 64, 512)) {
            d.ops().matmul(xt, wt, null, out);
            return d.toFloats(out);
        }
    }
}
