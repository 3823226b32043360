package org.mstar.jobs;

import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.model.llama.RandomWeights;

/**
 * The two rates a serving ceiling is computed from, measured on the device in the same run: copy bandwidth (bytes
 * read plus bytes written per second by device-to-device copies of a buffer much larger than any cache) and the
 * matmul rate (FLOPs per second of large square products in the device's compute type: bf16 on a GPU, fp32 on the
 * CPU). Best of several repetitions, after a warm-up.
 *
 * <p>The products run on random operands, several back to back: a GPU multiplies zeros about 15 % faster than
 * real values (its tensor cores draw less power, so its clock stays higher), and a single product runs before the
 * clock settles to what a load of many sustains (an H200, 8192³ bf16: 899 TFLOP/s on zeros, 793 on random values
 * alone, 765 twenty back to back). A model's matmuls get the sustained random-operand rate.
 */
record DeviceRates(double bytesPerSecond, double flopsPerSecond) {
    private static final int REPEATS = 5;
    /** Products timed together in one repetition of the matmul rate. */
    private static final int PRODUCTS_PER_REPEAT = 10;

    static DeviceRates measure(Device device) {
        boolean gpu = device.isCuda();
        DType type = gpu ? DType.BF16 : DType.F32;
        long elements = gpu ? 1L << 30 : 1L << 24; // 2 GiB of bf16; 64 MiB of fp32
        int n = gpu ? 8192 : 384;
        double bandwidth;
        try (Tensor a = device.zeros(type, elements); Tensor b = device.zeros(type, elements)) {
            double bytes = 2.0 * elements * type.bytes();
            bandwidth = bytes / best(device, () -> device.copy(a, b));
        }
        double rate;
        try (Tensor x = device.zeros(type, n, n); Tensor w = device.zeros(type, n, n);
             Tensor out = device.zeros(type, n, n)) {
            RandomWeights.fill(x, 1, "rates.x", 0, 1);
            RandomWeights.fill(w, 2, "rates.w", 0, 1);
            rate = 2.0 * n * n * n * PRODUCTS_PER_REPEAT / best(device, () -> {
                for (int i = 0; i < PRODUCTS_PER_REPEAT; i++) {
                    device.ops().matmul(x, w, null, out);
                }
            });
        }
        return new DeviceRates(bandwidth, rate);
    }

    /** Fastest of {@link #REPEATS} timed runs of {@code work}, in seconds, after one untimed run. */
    private static double best(Device device, Runnable work) {
        work.run();
        device.synchronize();
        double best = Double.MAX_VALUE;
        for (int i = 0; i < REPEATS; i++) {
            long t = System.nanoTime();
            work.run();
            device.synchronize();
            best = Math.min(best, (System.nanoTime() - t) / 1e9);
        }
        return best;
    }
}
