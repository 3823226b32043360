package org.mstar.device;

import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;

/**
 * An {@link AllReduce} whose ranks meet at a barrier; the last to arrive sums every rank's tensor
 * ({@link #reduce}) while the others wait, so the ranks run on only once each tensor holds the sum.
 */
public abstract class BarrierAllReduce implements AllReduce {
    private final Tensor[] parts;
    private final CyclicBarrier barrier;
    private volatile boolean aborted;

    protected BarrierAllReduce(int ranks) {
        this.parts = new Tensor[ranks];
        this.barrier = new CyclicBarrier(ranks, () -> reduce(parts));
    }

    /** Writes the sum of {@code parts} (one per rank, rank order) into each of them. */
    protected abstract void reduce(Tensor[] parts);

    @Override
    public final void sum(int rank, Tensor t) {
        if (parts.length == 1) {
            return;
        }
        if (aborted) {
            throw new IllegalStateException("all-reduce abandoned on rank " + rank + ": another rank failed");
        }
        parts[rank] = t;
        try {
            barrier.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("all-reduce interrupted on rank " + rank, e);
        } catch (BrokenBarrierException e) {
            throw new IllegalStateException("all-reduce abandoned on rank " + rank + ": another rank failed", e);
        }
    }

    @Override
    public final void abort() {
        aborted = true;
        barrier.reset();
    }

    @Override
    public final void rearm() {
        barrier.reset();
        aborted = false;
    }

    /** Fails unless every part has the first's shape and dtype. */
    protected static void requireAlike(Tensor[] parts) {
        for (int r = 1; r < parts.length; r++) {
            if (parts[r].numel() != parts[0].numel() || parts[r].dtype() != parts[0].dtype()) {
                throw new IllegalArgumentException("all-reduce of " + parts[0].numel() + " " + parts[0].dtype()
                        + " values on rank 0 but " + parts[r].numel() + " " + parts[r].dtype() + " on rank " + r);
            }
        }
    }
}
