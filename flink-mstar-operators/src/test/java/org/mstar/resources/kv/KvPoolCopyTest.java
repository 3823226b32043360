package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.util.Random;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;

/** Pool-to-pool page copies of a same-device hand-off, over more pages than one device buffer holds. */
class KvPoolCopyTest {

    @Test
    void pagesArriveWholeAtTheirTargetsAcrossSeveralBuffers() {
        int n = 2 * KvPool.PAGES_PER_COPY + 5;
        try (CpuDevice cpu = new CpuDevice(1)) {
            KvPool from = new KvPool(cpu, DType.F32, 2, n + 3, 2, 4, 2, 8);
            KvPool into = new KvPool(cpu, DType.F32, 2, n + 10, 2, 4, 2, 8);
            int[] src = IntStream.range(0, n).map(i -> n + 2 - i).toArray(); // reversed, page 0 left out
            int[] dst = IntStream.range(0, n).map(i -> 7 + (i * 5) % n).toArray();
            float[] values = new float[n * from.pageBytes() / 4];
            Random rnd = new Random(1);
            for (int i = 0; i < values.length; i++) {
                values[i] = rnd.nextFloat();
            }
            ByteBuffer data = ByteBuffer.allocate(values.length * 4).order(java.nio.ByteOrder.LITTLE_ENDIAN);
            data.asFloatBuffer().put(values);
            from.scatter(src, data);

            from.copyPagesTo(src, into, dst);

            assertThat(into.gather(dst)).isEqualTo(from.gather(src));
        }
    }

    @Test
    void aPoolOfAnotherLayoutIsRefused() {
        try (CpuDevice cpu = new CpuDevice(1)) {
            KvPool from = new KvPool(cpu, DType.F32, 2, 8, 2, 4, 2, 8);
            KvPool into = new KvPool(cpu, DType.F32, 2, 8, 2, 4, 2, 16);
            assertThatThrownBy(() -> from.copyPagesTo(new int[] {1}, into, new int[] {1}))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("2x8").hasMessageContaining("2x16");
            // a latent pool (one plane) and an NHD pool (K and V) of the same row width
            KvPool latent = new KvPool(cpu, DType.F32, 2, 8, 1, 4, 1, 16);
            KvPool nhd = new KvPool(cpu, DType.F32, 2, 8, 2, 4, 1, 16);
            assertThatThrownBy(() -> latent.copyPagesTo(new int[] {1}, nhd, new int[] {1}))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("1 planes");
        }
    }
}
