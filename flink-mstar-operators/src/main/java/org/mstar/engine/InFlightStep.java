package org.mstar.engine;

import java.util.HashSet;
import java.util.Set;
import org.mstar.resources.sampler.PendingDraw;

/**
 * A step whose forward and draw are enqueued and whose resources (bar the sampler) are committed; its tokens
 * are on the device and not yet accepted.
 *
 * @param hostLogits the logits of the step's rows read on the host ({@link PlannedStep#logitsRows}), in order
 * @param launchedNanos when its launch began, for the scheduler's step cost
 */
record InFlightStep(PlannedStep step, PendingDraw draw, float[][] hostLogits, long launchedNanos) {
    /** The requests of its rows. */
    Set<LiveRequest> requests() {
        Set<LiveRequest> requests = new HashSet<>();
        step.rows().forEach(row -> requests.add(row.request()));
        return requests;
    }
}
