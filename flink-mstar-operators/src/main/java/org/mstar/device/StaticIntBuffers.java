package org.mstar.device;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HashMap;
import java.util.Map;

/**
 * I32 device buffers that keep their address from one step to the next, one per key: the step metadata
 * (position ids, page tables) a captured accelerator graph reads on replay. A buffer is sized on first
 * use and then never moves or grows, because graphs captured against it hold its address.
 */
public final class StaticIntBuffers implements AutoCloseable {
    private final Device device;
    private final Map<Object, Tensor> buffers = new HashMap<>();

    public StaticIntBuffers(Device device) {
        this.device = device;
    }

    /**
     * Overwrites the first {@code values.length} entries of {@code key}'s buffer, creating it zeroed with
     * {@code capacity} entries on first use, and returns the whole buffer. Entries past
     * {@code values.length} keep whatever an earlier step wrote (stale padding a replay may read).
     *
     * @throws IllegalStateException when {@code values} do not fit the buffer
     */
    public Tensor write(Object key, int capacity, int[] values) {
        Tensor buf = buffers.computeIfAbsent(key, k -> device.zeros(DType.I32, capacity));
        if (values.length > buf.dim(0)) {
            throw new IllegalStateException("static buffer " + key + " holds " + buf.dim(0) + " entries, "
                    + values.length + " asked; captured graphs hold its address, so it cannot grow");
        }
        if (values.length > 0) {
            ByteBuffer bytes = ByteBuffer.allocate(values.length * Integer.BYTES).order(ByteOrder.LITTLE_ENDIAN);
            bytes.asIntBuffer().put(values);
            device.copyFromHost(bytes, buf.rows(0, values.length));
        }
        return buf;
    }

    @Override
    public void close() {
        buffers.values().forEach(Tensor::close);
        buffers.clear();
    }
}
