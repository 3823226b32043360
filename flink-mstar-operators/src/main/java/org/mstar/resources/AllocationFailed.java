package org.mstar.resources;

/**
 * Retryable: the resource ran out of capacity. {@code pagesShort} counts what was still missing after
 * the prefix index was asked to evict. The {@code rows*} fields are optional hints for shrinking the
 * batch (how many leading rows fit together, alone, and how many rows were examined).
 */
public record AllocationFailed(String message, int pagesShort, String label, String requestId,
                               Integer rowsFit, Integer rowsFitAlone, Integer rowsSized)
        implements AdmitFailedReason {

    public AllocationFailed(String message, int pagesShort, String label, String requestId) {
        this(message, pagesShort, label, requestId, null, null, null);
    }
}
