package org.mstar.resources;

/**
 * What the runner answers with: one resource's outcome plus the runner key of the resource that gave
 * it. A resource does not know its own key, so the runner names it; the caller needs it to scope an
 * eviction to the resource that ran out.
 */
public record FullAdmitOutcome(AdmitOutcome outcome, String failedResource) {
    public static final FullAdmitOutcome OK = new FullAdmitOutcome(AdmitOutcome.OK, null);
    public static final FullAdmitOutcome NOT_READY = new FullAdmitOutcome(AdmitOutcome.NOT_READY, null);

    public boolean ok() { return outcome.ok(); }
    public boolean ready() { return outcome.ready(); }
    public AdmitFailedReason reason() { return outcome.reason(); }
}
