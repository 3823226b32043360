package org.mstar.engine;

/** Where a live request is in its life. */
enum RequestStatus {
    /** Accepted, never scheduled: holds no KV. */
    WAITING,
    /** Scheduled at least once; its KV is resident (possibly partially, mid prefill). */
    RUNNING,
    /** Moved to host memory by preemption; reloaded before its next step. */
    OFFLOADED
}
