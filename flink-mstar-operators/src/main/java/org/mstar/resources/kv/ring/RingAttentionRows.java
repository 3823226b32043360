package org.mstar.resources.kv.ring;

import org.mstar.device.Device;
import org.mstar.device.RingAttentionPlan;
import org.mstar.device.Tensor;

/**
 * One layer's device tensors of a step: the rows each frame's K/V is appended to (its session's tail, in
 * frame order) and the ring attention plan over the rows each frame sees.
 */
public final class RingAttentionRows implements AutoCloseable {
    private final Tensor qoIndptr;
    private final Tensor kvIndptr;
    private final Tensor kvRows;
    private final Tensor appendRows;
    private final RingAttentionPlan plan;

    RingAttentionRows(Device device, int[] appendRows, int[] qoIndptr, int[] kvIndptr, int[] kvRows, int maxQoLen, int maxKvLen,
                      float smScale) {
        this.qoIndptr = device.fromInts(qoIndptr, qoIndptr.length);
        this.kvIndptr = device.fromInts(kvIndptr, kvIndptr.length);
        this.kvRows = device.fromInts(kvRows, kvRows.length);
        this.appendRows = device.fromInts(appendRows, appendRows.length);
        int segments = qoIndptr.length - 1;
        this.plan = new RingAttentionPlan(segments, this.qoIndptr, this.kvIndptr, this.kvRows, qoIndptr[segments],
                maxQoLen, maxKvLen, smScale);
    }

    public RingAttentionPlan plan() { return plan; }
    /** I32 {@code [frames * tokensPerFrame]}: where {@code ringAppend} puts each token's K and V. */
    public Tensor appendRows() { return appendRows; }

    @Override
    public void close() {
        qoIndptr.close();
        kvIndptr.close();
        kvRows.close();
        appendRows.close();
    }
}
