package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuStreamCreate;
import static jcuda.driver.JCudaDriver.cuStreamDestroy;
import static jcuda.driver.JCudaDriver.cuStreamIsCapturing;
import static jcuda.driver.JCudaDriver.cuStreamSynchronize;
import static org.mstar.device.cuda.CudaCheck.check;

import jcuda.driver.CUstream;
import jcuda.driver.CUstreamCaptureStatus;
import jcuda.driver.CUstream_flags;
import org.mstar.device.DeviceStream;

/**
 * A non-blocking stream: it never waits on the legacy default stream, so every transfer the device makes
 * is enqueued here explicitly and ordered with the kernels.
 */
public final class CudaStream implements DeviceStream, AutoCloseable {
    private final CUstream stream = new CUstream();
    private final StreamCounters counters = new StreamCounters();
    private boolean closed;

    public CudaStream() {
        check(cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    }

    public CUstream handle() {
        return stream;
    }

    /** What has been asked of this stream so far. */
    public StreamCounters counters() {
        return counters;
    }

    /** Whether work enqueued now is being recorded into a graph rather than run (nothing may be read back). */
    public boolean capturing() {
        int[] status = new int[1];
        check(cuStreamIsCapturing(stream, status), "cuStreamIsCapturing");
        return status[0] != CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE;
    }

    @Override
    public void synchronize() {
        long start = System.nanoTime();
        check(cuStreamSynchronize(stream), "cuStreamSynchronize");
        counters.sync(System.nanoTime() - start);
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            check(cuStreamDestroy(stream), "cuStreamDestroy");
        }
    }
}
