package org.mstar.resources;

import java.util.Set;

/**
 * Terminal: the resource can never serve these requests (an empty set means the step as a whole).
 * No eviction or reload makes it go away, so the caller fails the requests instead of retrying.
 */
public record AdmitRuntimeError(String message, Set<String> requestIds) implements AdmitFailedReason {
    public AdmitRuntimeError {
        requestIds = Set.copyOf(requestIds);
    }

    public AdmitRuntimeError(String message) {
        this(message, Set.of());
    }

    @Override
    public boolean terminal() {
        return true;
    }
}
