package org.mstar.device;

/**
 * A sum over the devices of a {@link DeviceGroup}, called by every rank with its own tensor: when each rank's call
 * returns, every rank's tensor holds the sum of all of them, added in rank order (rank 0 first), so a run is
 * deterministic. Each rank calls from the thread that drives its device; the calls of one reduction meet, so every
 * rank must make the same sequence of calls with tensors of one shape and dtype.
 */
public interface AllReduce {

    /** Replaces {@code t} (this rank's partial sum) with the sum over the ranks; blocks until every rank called. */
    void sum(int rank, Tensor t);

    /**
     * After one rank failed: releases the ranks waiting in {@link #sum} and fails every later call with an error, so
     * no rank waits for the failed one, until {@link #rearm}.
     */
    void abort();

    /** Makes reductions possible again once every rank of an aborted step has returned. */
    void rearm();
}
