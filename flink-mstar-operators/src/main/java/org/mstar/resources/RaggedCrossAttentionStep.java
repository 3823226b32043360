package org.mstar.resources;

import java.util.List;

/**
 * Which spans attend which: for each (qLabel, kvLabel) pair every request's qLabel span attends its
 * kvLabel span. Never causal.
 */
public final class RaggedCrossAttentionStep extends ResourceStep {
    public record Pair(String qLabel, String kvLabel) {}

    private final List<Pair> pairs;

    public RaggedCrossAttentionStep(List<Segment> segments, List<Pair> pairs) {
        super(segments);
        this.pairs = List.copyOf(pairs);
    }

    public List<Pair> pairs() { return pairs; }

    /** The plan a pair runs under: {@code qLabel}'s spans attending {@code kvLabel}'s. */
    public static String crossLabel(String qLabel, String kvLabel) {
        return qLabel + "->" + kvLabel;
    }
}
