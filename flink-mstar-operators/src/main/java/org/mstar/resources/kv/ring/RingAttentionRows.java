package org.mstar.resources.kv.ring;

import org.mstar.device.Device;
import org.mstar.device.RingAttentionPlan;
import org.mstar.device.Tensor;

/** A step's ring attention plan of one layer and the device index tensors it owns. */
public final class RingAttentionRows implements AutoCloseable {
    private final Tensor qoIndptr;
    private final Tensor kvIndptr;
    private final Tensor kvRows;
    private final RingAttentionPlan plan;

    RingAttentionRows(Device device, int[] qoIndptr, int[] kvIndptr, int[] kvRows, int maxQoLen, int maxKvLen,
                      float smScale) {
        this.qoIndptr = device.fromInts(qoIndptr, qoIndptr.length);
        this.kvIndptr = device.fromInts(kvIndptr, kvIndptr.length);
        this.kvRows = device.fromInts(kvRows, kvRows.length);
        int segments = qoIndptr.length - 1;
        this.plan = new RingAttentionPlan(segments, this.qoIndptr, this.kvIndptr, this.kvRows, qoIndptr[segments],
                maxQoLen, maxKvLen, smScale);
    }

    public RingAttentionPlan plan() { return plan; }

    @Override
    public void close() {
        qoIndptr.close();
        kvIndptr.close();
        kvRows.close();
    }
}
