package org.mstar.resources;

import java.util.List;

/** One ring clock per request in the step's batch: (request id, frame position). */
public final class RingKVStep extends ResourceStep {
    /** One request's frame in this step. */
    public record Frame(String requestId, int framePos) {}

    private final List<Frame> frames;

    public RingKVStep(List<Segment> segments, List<Frame> frames) {
        super(segments);
        this.frames = List.copyOf(frames);
    }

    public List<Frame> frames() { return frames; }
}
