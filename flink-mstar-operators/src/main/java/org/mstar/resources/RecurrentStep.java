package org.mstar.resources;

import java.util.List;

/**
 * A step's rows for the recurrent-state resource: one segment per request, its span the tokens the step feeds
 * through the request's state (a prefill chunk's length, 1 for a decode row).
 */
public final class RecurrentStep extends ResourceStep {
    public RecurrentStep(List<Segment> segments) {
        super(segments);
    }

    /** The step's default segments. */
    public RecurrentStep() {
        this(null);
    }
}
