package org.mstar.engine;

import org.mstar.resources.sampler.PendingDraw;

/**
 * A step whose forward and draw are enqueued and whose resources (bar the sampler) are committed; its tokens
 * are on the device and not yet accepted.
 *
 * @param launchedNanos when its launch began, for the scheduler's step cost
 */
record InFlightStep(PlannedStep step, PendingDraw draw, long launchedNanos) {
}
