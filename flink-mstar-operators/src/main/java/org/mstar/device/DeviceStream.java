package org.mstar.device;

/**
 * An ordered queue of device work. Ops enqueue on the device's current stream and may return before
 * the work finishes; host reads ({@link Device#toFloats} etc.) synchronise first. The CPU device runs
 * everything eagerly, so its stream is always idle.
 */
public interface DeviceStream {
    /** Block until every op enqueued so far has finished. */
    void synchronize();
}
