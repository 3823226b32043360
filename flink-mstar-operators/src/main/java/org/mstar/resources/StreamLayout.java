package org.mstar.resources;

import java.util.List;

/**
 * How one KV stream of a request will grow: its prefix spans, per-loop growth, scratch slots and an
 * optional retention window. {@code pages(caps, ps)} bounds the pages it can ever hold.
 */
public record StreamLayout(List<PrefixSpan> spans, List<LoopGrowth> growth, int scratch, RetentionPolicy retention,
                           List<Integer> keyedSpans) {
    public StreamLayout {
        spans = List.copyOf(spans);
        growth = List.copyOf(growth);
        keyedSpans = keyedSpans == null ? List.of() : List.copyOf(keyedSpans);
        if (scratch < 0) throw new IllegalArgumentException("scratch must be >= 0");
    }
}
