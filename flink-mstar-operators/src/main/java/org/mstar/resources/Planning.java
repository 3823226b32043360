package org.mstar.resources;

/**
 * A {@link Resource} that plans each step it takes part in: addressing and metadata the forward reads.
 *
 * @param <P> the plan; its dependents read it from {@code ctx.planResults()} under this resource's key
 */
public interface Planning<P> {

    /** The plan of {@code step}; null when this step needs none. */
    P plan(ResourceStep step, StepContext ctx);
}
