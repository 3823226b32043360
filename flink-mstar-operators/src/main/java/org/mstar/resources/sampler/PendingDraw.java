package org.mstar.resources.sampler;

import java.util.List;
import org.mstar.device.PendingInts;
import org.mstar.device.Tensor;

/**
 * A draw enqueued on the device ({@link SamplerResource#launchSample}). Its tokens stay on the device, where the
 * next step may feed them before the host has seen them ({@link #onDevice}), and reach the host at
 * {@link #tokens}, which also hands them to the sampler's next commit.
 */
public final class PendingDraw implements AutoCloseable {
    private final SamplerResource sampler;
    private final List<String> rids;
    /** Per row, the request's sampling state when the draw was enqueued (null for a row the sampler did not know). */
    private final List<SamplingState> states;
    /** Null when there are no rows. */
    private final Tensor tokensOnDevice;
    private final PendingInts read;
    private int[] tokens;

    PendingDraw(SamplerResource sampler, List<String> rids, List<SamplingState> states, Tensor tokensOnDevice,
                PendingInts read) {
        this.sampler = sampler;
        this.rids = rids;
        this.states = states;
        this.tokensOnDevice = tokensOnDevice;
        this.read = read;
    }

    /** The drawn tokens, I32 {@code [rows]}, valid until {@link #close}. */
    public Tensor onDevice() {
        if (tokensOnDevice == null) {
            throw new IllegalStateException("a draw of no rows has no tokens on the device");
        }
        return tokensOnDevice;
    }

    /**
     * The token of each row, waiting for the device the first time. Rows of requests the sampler still tracks as
     * they were at the draw are then the ones its commit accepts; a request removed (or removed and registered
     * again) since keeps no part of this draw.
     */
    public int[] tokens() {
        if (tokens == null) {
            tokens = tokensOnDevice == null ? new int[0] : read.get();
            sampler.drawn(rids, states, tokens);
        }
        return tokens;
    }

    @Override
    public void close() {
        if (tokensOnDevice != null) {
            tokensOnDevice.close();
        }
    }
}
