package org.mstar.device.cuda.harness;

import java.util.Arrays;
import java.util.function.IntConsumer;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.device.cuda.CudaEvent;
import org.mstar.device.cuda.CudaGraph;

/** Median device time of repeated work, each repetition between its own pair of events, after warm-ups. */
final class Timing {
    private static final int CALLS_PER_GRAPH = 10;

    private Timing() {}

    /**
     * Per-call time of {@code call(i)} for i = 0..9 captured into one CUDA graph and replayed: the host's
     * launch latency drops out, as in a model step replayed from a graph (without programmatic launch).
     */
    static double graphedMillisPerCall(CudaDevice gpu, IntConsumer call) {
        call.accept(0); // first use (library kernel loading, workspace growth) stays out of the capture
        try (CudaGraph graph = CudaGraph.capture(gpu.stream(), () -> {
            for (int i = 0; i < CALLS_PER_GRAPH; i++) {
                call.accept(i);
            }
        }, null)) { // plain stream order: each call's own time, not overlapped with the next
            return medianMillis(gpu, graph::replay, 2, 15) / CALLS_PER_GRAPH;
        }
    }

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
