package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuEventCreate;
import static jcuda.driver.JCudaDriver.cuEventDestroy;
import static jcuda.driver.JCudaDriver.cuEventRecord;
import static jcuda.driver.JCudaDriver.cuEventSynchronize;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoHAsync;
import static org.mstar.device.cuda.CudaCheck.check;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import org.mstar.device.PendingInts;

/**
 * Small device-to-host reads the host collects later (a step's sampled tokens), so that the next step can be
 * enqueued first: each read copies into a pinned slot and records an event behind the copy, and collecting
 * waits on that event, not on the stream. A slot returns to the pool once its read is collected; a read never
 * collected keeps its slot.
 */
final class Readbacks implements AutoCloseable {
    static final int SLOT_BYTES = 64 << 10;

    private final ArrayDeque<Slot> idle = new ArrayDeque<>();
    private final List<Slot> all = new ArrayList<>();

    /** Enqueues the copy of the I32 tensor {@code src}, of at most {@link #SLOT_BYTES} (the caller's check). */
    PendingInts read(CudaTensor src, CudaStream stream) {
        long bytes = src.byteSize();
        Slot slot = idle.isEmpty() ? newSlot() : idle.pop();
        check(cuMemcpyDtoHAsync(slot.buffer.pointer(), src.pointer(), bytes, stream.handle()),
                "cuMemcpyDtoHAsync(" + bytes + " bytes) into a read-back slot");
        check(cuEventRecord(slot.copied, stream.handle()), "cuEventRecord for a read-back");
        int count = Math.toIntExact(src.numel());
        return new PendingInts() {
            private int[] values;

            @Override
            public int[] get() {
                if (values == null) {
                    check(cuEventSynchronize(slot.copied), "cuEventSynchronize for a read-back");
                    values = new int[count];
                    slot.buffer.buffer().asIntBuffer().get(values);
                    idle.push(slot);
                }
                return values;
            }
        };
    }

    private Slot newSlot() {
        Slot s = new Slot(new PinnedBuffer(SLOT_BYTES), new CUevent());
        check(cuEventCreate(s.copied, CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate for a read-back");
        all.add(s);
        return s;
    }

    @Override
    public void close() {
        for (Slot s : all) {
            check(cuEventDestroy(s.copied), "cuEventDestroy for a read-back");
            s.buffer.close();
        }
        all.clear();
        idle.clear();
    }

    private record Slot(PinnedBuffer buffer, CUevent copied) {}
}
