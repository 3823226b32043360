package org.mstar.device;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/**
 * The CPU group's all-reduce leaves every rank with the sum added in rank order, whichever rank arrives last, and a
 * rank that fails releases the others from their reductions with its own error, after which the group reduces again.
 */
class DeviceGroupTest {

    @Test
    void everyRankHoldsTheSumInRankOrder() {
        float[][] parts = {{1e8f, 1f, -3.5f}, {1f, 2f, 0.25f}, {-1e8f, 4f, 1e-3f}};
        float[] expected = new float[3];
        for (int i = 0; i < 3; i++) {
            expected[i] = (parts[0][i] + parts[1][i]) + parts[2][i];
        }
        try (DeviceGroup group = DeviceGroup.open("cpu", 3, KernelOptions.defaults())) {
            float[][] out = new float[3][];
            group.parallel(r -> {
                Device d = group.device(r);
                try (Tensor t = d.fromFloats(parts[r], DType.F32, 3)) {
                    group.allReduce().sum(r, t);
                    out[r] = d.toFloats(t);
                }
            });
            for (float[] o : out) {
                assertThat(o).containsExactly(expected);
            }
            assertThat(expected[0]).as("rank order, not (0 + 2) + 1").isEqualTo(0f);
        }
    }

    @Test
    void aFailingRankReleasesTheOthers() {
        try (DeviceGroup group = DeviceGroup.open("cpu", 3, KernelOptions.defaults())) {
            assertThatThrownBy(() -> group.parallel(r -> {
                if (r == 1) {
                    throw new IllegalStateException("rank 1 broke");
                }
                try (Tensor t = group.device(r).zeros(DType.F32, 2)) {
                    group.allReduce().sum(r, t);
                }
            })).hasMessage("rank 1 broke");
            float[][] out = new float[3][];
            group.parallel(r -> {
                try (Tensor t = group.device(r).fromFloats(new float[] {r, 1}, DType.F32, 2)) {
                    group.allReduce().sum(r, t);
                    out[r] = group.device(r).toFloats(t);
                }
            });
            assertThat(out[2]).containsExactly(3f, 3f);
        }
    }

    @Test
    void namesTheDevicesOfAGroup() {
        assertThatThrownBy(() -> DeviceGroup.open("cuda:0,cuda:1", 4, KernelOptions.defaults()))
                .hasMessage("device list 'cuda:0,cuda:1' names 2 devices for a tensor parallel degree of 4");
        assertThatThrownBy(() -> DeviceGroup.open("cpu", 0, KernelOptions.defaults()))
                .hasMessage("tensor parallel degree must be >= 1, got 0");
    }
}
