package org.mstar.resources;

import java.util.List;

/**
 * What one resource is asked to do in one step. Subclasses add the resource's own knobs.
 *
 * <p>{@code segments} may be left null; {@link SubmoduleStep} then fills in its default segments
 * once, when the step is assembled, so every resource reads {@link #segments()} the same way.
 */
public abstract class ResourceStep {
    private List<Segment> segments;

    protected ResourceStep(List<Segment> segments) {
        this.segments = segments == null ? null : List.copyOf(segments);
    }

    /** This step's segments, in batch order; null only before a {@link SubmoduleStep} defaulted them. */
    public final List<Segment> segments() {
        return segments;
    }

    /** True when the segments were given explicitly or already defaulted. */
    public final boolean hasSegments() {
        return segments != null;
    }

    final void defaultSegments(List<Segment> defaults) {
        if (segments == null) {
            segments = defaults == null ? List.of() : List.copyOf(defaults);
        }
    }
}
