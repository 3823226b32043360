package org.mstar.resources;

import java.util.List;
import java.util.Map;

/**
 * Positions for a step. {@code posIds} overrides per plan label; {@code advance} overrides, per
 * segment, how far commit moves each counter.
 */
public final class PositionStep extends ResourceStep {
    private final Map<String, int[]> posIds;
    private final List<Integer> advance;

    public PositionStep(List<Segment> segments, Map<String, int[]> posIds, List<Integer> advance) {
        super(segments);
        this.posIds = posIds == null ? null : Map.copyOf(posIds);
        this.advance = advance == null ? null : List.copyOf(advance);
    }

    public PositionStep() {
        this(null, null, null);
    }

    public Map<String, int[]> posIds() { return posIds; }
    public List<Integer> advance() { return advance; }
}
