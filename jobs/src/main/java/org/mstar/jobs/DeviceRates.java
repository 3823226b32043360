package org.mstar.jobs;

import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;

/**
 * The two rates a serving ceiling is computed from, measured on the device in the same run: copy bandwidth (bytes
 * read plus bytes written per second by device-to-device copies of a buffer much larger than any cache) and the
 * matmul rate (FLOPs per second of large square products in the device's compute type: bf16 on a GPU, fp32 on the
 * CPU). Best of several repetitions, after a warm-up.
 */
record DeviceRates(double bytesPerSecond, double flopsPerSecond) {
    private static final int REPEATS = 5;

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
            rate = 2.0 * n * n * n / best(device, () -> device.ops().matmul(x, w, null, out));
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
