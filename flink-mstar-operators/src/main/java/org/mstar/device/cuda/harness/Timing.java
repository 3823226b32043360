package org.mstar.device.cuda.harness;

import java.util.Arrays;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.device.cuda.CudaEvent;

/** Median device time of repeated work, each repetition between its own pair of events, after warm-ups. */
final class Timing {
    private Timing() {}

    static double medianMillis(CudaDevice gpu, Runnable work, int warmups, int reps) {
        for (int i = 0; i < warmups; i++) {
            work.run();
        }
        double[] ms = new double[reps];
        try (CudaEvent start = new CudaEvent(); CudaEvent end = new CudaEvent()) {
            for (int i = 0; i < reps; i++) {
                start.record(gpu.stream());
                work.run();
                end.record(gpu.stream());
                ms[i] = end.millisSince(start);
            }
        }
        Arrays.sort(ms);
        return ms[reps / 2];
    }
}
