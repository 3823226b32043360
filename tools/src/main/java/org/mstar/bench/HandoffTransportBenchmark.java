package org.mstar.bench;

import java.nio.ByteBuffer;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.mstar.resources.kv.KvBytesGone;
import org.mstar.resources.kv.KvBytesServer;
import org.mstar.resources.kv.KvBytesTicket;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The network hand-off's transport alone, stage by stage, on one payload of {@code mib} MiB (1536: a 12k-token prompt
 * of Llama-3-8B's KV in bf16) held on the heap as the KV codec encodes it:
 * <ul>
 *   <li>{@code pull}: offer on a {@link KvBytesServer} and pull it back over loopback TCP, checked (the whole path of
 *       a ticket, without Flink: both ends in this process, on two threads);
 *   <li>{@code crc32c}: one CRC32C pass over the payload;
 *   <li>{@code copy}: one heap-to-heap copy of it, the memory bandwidth yardstick;
 *   <li>{@code allocate}: a new array of its size (the JVM zeroes it), which a pull into a fresh array pays.
 * </ul>
 * Times are per payload; GB/s is {@code mib * 1.048576 / ms}.
 *
 * <pre>java -jar tools/target/benchmarks.jar HandoffTransportBenchmark -p mib=1536</pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3)
@Measurement(iterations = 8)
@Fork(value = 1, jvmArgsAppend = {"-Xms6g", "-Xmx6g"})
public class HandoffTransportBenchmark {
    @Param({"256"})
    int mib;

    private ByteBuffer payload;
    private byte[] target;
    private KvBytesServer server;

    @Setup
    public void setup() throws Exception {
        byte[] b = new byte[mib << 20];
        new Random(1).nextBytes(b);
        payload = ByteBuffer.wrap(b);
        target = new byte[b.length];
        server = KvBytesServer.start("127.0.0.1", Long.MAX_VALUE);
    }

    @TearDown
    public void close() throws Exception {
        server.close();
    }

    @Benchmark
    public ByteBuffer pull() throws KvBytesGone {
        KvBytesTicket ticket = server.offer(payload.duplicate());
        return KvBytesServer.overSocket(ticket);
    }

    @Benchmark
    public long crc32c() {
        CRC32C crc = new CRC32C();
        crc.update(payload.duplicate());
        return crc.getValue();
    }

    @Benchmark
    public byte[] copy() {
        System.arraycopy(payload.array(), 0, target, 0, target.length);
        return target;
    }

    @Benchmark
    public byte[] allocate() {
        return new byte[mib << 20];
    }
}
