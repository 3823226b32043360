package org.mstar.resources;

/** A {@link Resource} that reserves capacity (KV pages, a context slot) for a step before it runs. */
public interface Admission {

    /** Reserve what {@code step} needs: fully, or refuse leaving nothing {@link #rollbackAdmit} cannot undo. */
    AdmitOutcome admit(ResourceStep step, StepContext ctx);

    /**
     * Give back only what this reservation freshly took. Called for every resource a refused step reached,
     * including the one that refused, and for an admitted step that will not run.
     */
    default void rollbackAdmit(ResourceStep step, StepContext ctx) {}
}
