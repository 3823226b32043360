package org.mstar.device;

/**
 * Device work recorded once and replayed as a unit (a CUDA graph on a GPU). A replay reads and writes the
 * very tensors the recorded work named, with whatever they hold at replay time.
 */
public interface DeviceGraph extends AutoCloseable {
    /** Enqueues one replay. */
    void replay();

    @Override
    void close();
}
