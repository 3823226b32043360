package org.mstar.resources;

/**
 * Retryable without eviction: the request's state is moving to host memory; the step is re-driven
 * once {@code reload} has brought it back.
 */
public record RequestOffloading(String message, String label, String requestId) implements AdmitFailedReason {}
