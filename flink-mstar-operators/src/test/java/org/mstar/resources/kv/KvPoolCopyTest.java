package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.util.Random;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;

/**
 * Pool-to-pool page copies of a hand-off by handle: on one device over more pages than one device buffer holds; onto
 * a pool of another device by the receiving device alone, in runs of pages consecutive on both sides.
 */
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
    void pagesArriveWholeOnAPoolOfAnotherDeviceInRunsAndShorterPiecesAlike() {
        try (CpuDevice one = new CpuDevice(1); CpuDevice other = new CpuDevice(1)) {
            KvPool from = new KvPool(one, DType.BF16, 3, 12, 2, 4, 2, 8);
            KvPool into = new KvPool(other, DType.BF16, 3, 20, 2, 4, 2, 8);
            int[] src = {3, 4, 5, 9, 2, 10, 11};
            int[] dst = {0, 1, 7, 8, 19, 4, 5}; // runs: 3-4 onto 0-1; 5, 9, 2 alone; 10-11 onto 4-5
            byte[] values = new byte[src.length * from.pageBytes()];
            new Random(2).nextBytes(values);
            from.scatter(src, ByteBuffer.wrap(values));
            byte[] before = into.gather(IntStream.range(0, 20).toArray());

            from.copyPagesTo(src, into, dst);

            assertThat(into.gather(dst)).isEqualTo(from.gather(src));
            int[] untouched = IntStream.range(0, 20).filter(p -> IntStream.of(dst).noneMatch(d -> d == p)).toArray();
            byte[] after = into.gather(untouched);
            int page = from.pageBytes() / 3; // one layer's page
            for (int i = 0; i < untouched.length; i++) {
                for (int layer = 0; layer < 3; layer++) {
                    int at = (layer * untouched.length + i) * page;
                    int was = (layer * 20 + untouched[i]) * page;
                    assertThat(java.util.Arrays.copyOfRange(after, at, at + page)).as("page %d layer %d", untouched[i],
                            layer).isEqualTo(java.util.Arrays.copyOfRange(before, was, was + page));
                }
            }
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
