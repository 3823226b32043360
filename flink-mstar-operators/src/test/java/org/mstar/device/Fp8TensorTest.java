package org.mstar.device;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.mstar.device.cpu.CpuDevice;

/** FP8 rows and an FP8 weight answer as tensors from their codes and scales: U8 of the codes' shape, both sizes. */
class Fp8TensorTest {
    private final CpuDevice cpu = new CpuDevice();
    private final List<Tensor> closed = new ArrayList<>();

    @AfterEach
    void closeDevice() {
        cpu.close();
    }

    @Test
    void rowsAreU8CodesOnTheirDeviceSizedWithTheirScales() {
        Fp8Rows rows = Fp8Rows.allocate(cpu, 5, 12);
        assertThat(rows.dtype()).isEqualTo(DType.U8);
        assertThat(rows.shape()).containsExactly(5L, 12L);
        assertThat(rows.device()).isSameAs(cpu);
        assertThat(rows.byteSize()).isEqualTo(5 * 12 + 5 * 4);
    }

    @Test
    void aBlockScaledWeightIsU8CodesOnTheirDeviceSizedWithItsScaleGrid() {
        Fp8Weight w = Fp8Weight.allocate(cpu, 300, 200, 128, 128);
        assertThat(w.dtype()).isEqualTo(DType.U8);
        assertThat(w.shape()).containsExactly(300L, 200L);
        assertThat(w.device()).isSameAs(cpu);
        assertThat(w.byteSize()).isEqualTo(300 * 200 + 3 * 2 * 4);
    }

    @Test
    void closingEitherClosesItsCodesAndScales() {
        Tensor codes = watched(cpu.allocate(DType.U8, 4, 8));
        Tensor scales = watched(cpu.allocate(DType.F32, 4));
        new Fp8Rows(codes, scales).close();
        assertThat(closed).containsExactly(codes, scales);

        closed.clear();
        Tensor wCodes = watched(cpu.allocate(DType.U8, 4, 8));
        Tensor wScales = watched(cpu.allocate(DType.F32, 1, 1));
        new Fp8Weight(wCodes, wScales, 4, 8).close();
        assertThat(closed).containsExactly(wCodes, wScales);
    }

    /** {@code t}, noting its close in {@link #closed}; reshapes of it are noted as it. */
    private Tensor watched(Tensor t) {
        return new Tensor() {
            @Override
            public DType dtype() {
                return t.dtype();
            }

            @Override
            public long[] shape() {
                return t.shape();
            }

            @Override
            public Device device() {
                return t.device();
            }

            @Override
            public Tensor rows(long firstRow, long rows) {
                return t.rows(firstRow, rows);
            }

            @Override
            public Tensor reshape(long... shape) {
                return this;
            }

            @Override
            public void close() {
                closed.add(this);
            }
        };
    }
}
