package org.mstar.device;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.cpu.CpuDevice;

/**
 * A moeExperts call's dimensions: read from its tensors, the stacks taken for all the router's experts unless the
 * call says they are a slice (expert parallelism), which a slice cannot exceed.
 */
class MoeExpertsShapeTest {
    private static final CpuDevice DEVICE = new CpuDevice(1);

    @AfterAll
    static void close() {
        DEVICE.close();
    }

    @Test
    void stacksAreAllTheRoutersExpertsUnlessCalledASlice() {
        try (Tensor x = DEVICE.allocate(DType.F32, 5, 16);
             Tensor gateUp = DEVICE.allocate(DType.F32, 4, 2 * 8, 16);
             Tensor down = DEVICE.allocate(DType.F32, 4, 16, 8);
             Tensor ids = DEVICE.allocate(DType.I32, 5, 2);
             Tensor weights = DEVICE.allocate(DType.F32, 5, 2);
             Tensor out = DEVICE.allocate(DType.F32, 5, 16)) {
            MoeExpertsShape shape = MoeExpertsShape.of(x, gateUp, down, ids, weights, out);
            assertThat(shape).isEqualTo(new MoeExpertsShape(5, 2, 4, 16, 8, 4));
            assertThat(shape.ofRouted(32)).isEqualTo(new MoeExpertsShape(5, 2, 4, 16, 8, 32));
            assertThatThrownBy(() -> shape.ofRouted(3)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("4 experts");
        }
    }
}
