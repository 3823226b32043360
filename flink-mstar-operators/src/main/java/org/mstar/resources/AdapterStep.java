package org.mstar.resources;

import java.util.List;

/** A step's rows for the adapter resource: each segment's request runs with the adapter it was opened with. */
public final class AdapterStep extends ResourceStep {
    public AdapterStep(List<Segment> segments) {
        super(segments);
    }

    /** The step's default segments. */
    public AdapterStep() {
        this(null);
    }
}
