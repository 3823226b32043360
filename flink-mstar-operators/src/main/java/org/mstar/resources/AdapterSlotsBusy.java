package org.mstar.resources;

/**
 * Retryable without eviction of anything running: every adapter slot holds an adapter that a running request uses,
 * so {@code requestId}'s adapter cannot be loaded now. The request waits until a slot is free.
 */
public record AdapterSlotsBusy(String message, String requestId) implements AdmitFailedReason {}
