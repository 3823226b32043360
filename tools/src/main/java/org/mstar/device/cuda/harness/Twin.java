package org.mstar.device.cuda.harness;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Random;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.HalfFloats;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.device.cuda.CudaDevice;

/**
 * The two devices under comparison and the helpers every check needs: identical inputs on both, poisoned
 * outputs (all bits set: NaN for floats, -1 for ints), error measures and device timing.
 */
final class Twin {
    final CudaDevice gpu;
    final CpuDevice cpu;
    final Random rnd;

    /** A tensor with the same contents on both devices. */
    record Pair(Tensor cpu, Tensor gpu) {}

    Twin(CudaDevice gpu, CpuDevice cpu, long seed) {
        this(gpu, cpu, new Random(seed));
    }

    private Twin(CudaDevice gpu, CpuDevice cpu, Random rnd) {
        this.gpu = gpu;
        this.cpu = cpu;
        this.rnd = rnd;
    }

    /** The same comparison on {@code gpu}, a view of this twin's GPU with other kernel options, drawing on one random stream. */
    Twin on(CudaDevice gpu) {
        return new Twin(gpu, cpu, rnd);
    }

    /** Uniform values in [-scale, scale), already rounded to {@code dt} so host references see what the devices hold. */
    float[] randomFloats(int n, float scale, DType dt) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = rounded((rnd.nextFloat() * 2 - 1) * scale, dt);
        }
        return v;
    }

    /** 0 .. n-1 shuffled by {@code rnd} (Fisher-Yates): page ids scattered through a pool as a serving pool's are. */
    static int[] permutation(Random rnd, int n) {
        int[] p = new int[n];
        Arrays.setAll(p, i -> i);
        for (int i = n - 1; i > 0; i--) {
            int j = rnd.nextInt(i + 1);
            int t = p[i];
            p[i] = p[j];
            p[j] = t;
        }
        return p;
    }

    static float rounded(float v, DType dt) {
        return switch (dt) {
            case BF16 -> HalfFloats.roundBf16(v);
            case F16 -> HalfFloats.roundF16(v);
            default -> v;
        };
    }

    Pair floats(float[] data, DType dt, long... shape) {
        return new Pair(cpu.fromFloats(data, dt, shape), gpu.fromFloats(data, dt, shape));
    }

    Pair ints(int[] data, long... shape) {
        return new Pair(cpu.fromInts(data, shape), gpu.fromInts(data, shape));
    }

    Pair longs(long[] data, long... shape) {
        return new Pair(cpu.fromLongs(data, shape), gpu.fromLongs(data, shape));
    }

    /** Output tensors on both devices, every byte 0xFF. */
    Pair poisoned(DType dt, long... shape) {
        return new Pair(poison(cpu, cpu.allocate(dt, shape)), poison(gpu, gpu.allocate(dt, shape)));
    }

    static Tensor poison(Device d, Tensor t) {
        byte[] ones = new byte[Math.toIntExact(t.byteSize())];
        Arrays.fill(ones, (byte) 0xFF);
        d.copyFromHost(ByteBuffer.wrap(ones), t);
        return t;
    }

    /** Median device milliseconds of five runs after one warm-up. */
    double median(Runnable work) {
        return Timing.medianMillis(gpu, work, 1, 5);
    }

    /** ‖got − ref‖ / ‖ref‖; infinite when either holds a NaN or infinity. */
    static double relErr(float[] ref, float[] got) {
        if (ref.length != got.length) {
            return Double.POSITIVE_INFINITY;
        }
        double diff = 0;
        double norm = 0;
        for (int i = 0; i < ref.length; i++) {
            if (!Float.isFinite(ref[i]) || !Float.isFinite(got[i])) {
                return Double.POSITIVE_INFINITY;
            }
            double d = (double) got[i] - ref[i];
            diff += d * d;
            norm += (double) ref[i] * ref[i];
        }
        return norm == 0 ? Math.sqrt(diff) : Math.sqrt(diff / norm);
    }

    static double mismatches(int[] ref, int[] got) {
        if (ref.length != got.length) {
            return Double.POSITIVE_INFINITY;
        }
        int bad = 0;
        for (int i = 0; i < ref.length; i++) {
            if (ref[i] != got[i]) {
                bad++;
            }
        }
        return bad;
    }

    /** Elements whose bits differ (a different length counts as infinitely many). */
    static double bitMismatches(float[] ref, float[] got) {
        if (ref.length != got.length) {
            return Double.POSITIVE_INFINITY;
        }
        int bad = 0;
        for (int i = 0; i < ref.length; i++) {
            if (Float.floatToRawIntBits(ref[i]) != Float.floatToRawIntBits(got[i])) {
                bad++;
            }
        }
        return bad;
    }

    static double tolerance(DType outputType) {
        return outputType == DType.F32 ? 1e-5 : 1e-2;
    }

    static String shape(long... dims) {
        return Arrays.toString(dims).replace(" ", "");
    }
}
