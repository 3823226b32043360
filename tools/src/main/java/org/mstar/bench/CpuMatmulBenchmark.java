package org.mstar.bench;

import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
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

/** The CPU reference matmul at a decode row count (1) and a prefill chunk (64), fp32 weights 2048×2048. */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
@Fork(1)
public class CpuMatmulBenchmark {
    @Param({"1", "64"})
    int rows;

    private CpuDevice device;
    private Tensor x;
    private Tensor w;
    private Tensor out;

    @Setup
    public void setup() {
        device = new CpuDevice();
        Random rnd = new Random(1);
        x = device.fromFloats(random(rnd, rows * 2048), DType.F32, rows, 2048);
        w = device.fromFloats(random(rnd, 2048 * 2048), DType.F32, 2048, 2048);
        out = device.allocate(DType.F32, rows, 2048);
    }

    static float[] random(Random rnd, int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) rnd.nextGaussian();
        }
        return v;
    }

    @Benchmark
    public Tensor matmul() {
        device.ops().matmul(x, w, null, out);
        return out;
    }

    @TearDown
    public void close() {
        device.close();
    }
}
