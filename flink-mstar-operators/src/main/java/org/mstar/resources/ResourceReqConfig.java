package org.mstar.resources;

import java.util.Map;

/**
 * Per-request parameters for one resource, carried on the request and handed to that resource at
 * ingest. Keyed by resource key, so it needs no tag of its own.
 */
public interface ResourceReqConfig {
    /**
     * Throw {@link RequestValidationException} (a 400) when a client-supplied value is out of range or
     * one the resource built from {@code spec} cannot honour. {@code spec} may be null.
     */
    default void validate(NodeResourceSpec spec) {}

    /** The most iterations each loop can run before the request outgrows the resource; unbounded loops are left out. */
    default Map<String, Integer> loopRoom(NodeResourceSpec spec) {
        return Map.of();
    }
}
