package org.mstar.resources;

/**
 * A {@link Planning} resource that can admit and plan a step ahead into a pending slot (when
 * {@code ctx.isPreplan()}), promoted when the same step then runs. Its dependencies must pre-plan too.
 */
public interface Preplanning {

    /** Undo the side effects of a staged pre-plan that will not be promoted. */
    void clearPreplan();
}
