package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuEventCreate;
import static jcuda.driver.JCudaDriver.cuEventDestroy;
import static jcuda.driver.JCudaDriver.cuEventElapsedTime;
import static jcuda.driver.JCudaDriver.cuEventRecord;
import static jcuda.driver.JCudaDriver.cuEventSynchronize;
import static org.mstar.device.cuda.CudaCheck.check;

import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;

/** A timing event recorded on a stream: device-side timestamps, free of host launch jitter. */
public final class CudaEvent implements AutoCloseable {
    private final CUevent event = new CUevent();
    private boolean closed;

    public CudaEvent() {
        check(cuEventCreate(event, CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate");
    }

    public void record(CudaStream stream) {
        check(cuEventRecord(event, stream.handle()), "cuEventRecord");
    }

    public void synchronize() {
        check(cuEventSynchronize(event), "cuEventSynchronize");
    }

    /** Milliseconds between {@code start} and this event, both recorded and this one finished. */
    public float millisSince(CudaEvent start) {
        synchronize();
        float[] ms = new float[1];
        check(cuEventElapsedTime(ms, start.event, event), "cuEventElapsedTime");
        return ms[0];
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            check(cuEventDestroy(event), "cuEventDestroy");
        }
    }
}
