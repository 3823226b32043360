package org.mstar.resources;

/**
 * Why a resource refused a step. {@link #terminal()} decides the caller's answer: a retryable reason
 * is met by eviction, reload or a smaller batch; a terminal one fails the named requests.
 */
public sealed interface AdmitFailedReason permits AllocationFailed, RequestOffloading, AdmitRuntimeError,
        AdapterSlotsBusy {
    String message();

    default boolean terminal() {
        return false;
    }
}
