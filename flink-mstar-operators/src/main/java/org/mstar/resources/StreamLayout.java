package org.mstar.resources;

import java.util.List;
import java.util.Map;

/**
 * How one KV stream of a request will grow: its prefix spans, per-loop growth, scratch slots and an
 * optional retention window. {@link #pages(Map, int)} bounds the pages it can ever hold.
 *
 * <p>{@code caps} maps a loop name to the iterations it may run; a loop missing from it counts 0.
 */
public record StreamLayout(List<PrefixSpan> spans, List<LoopGrowth> growth, int scratch, RetentionPolicy retention,
                           List<Integer> keyedSpans) {
    public StreamLayout {
        spans = List.copyOf(spans);
        growth = List.copyOf(growth);
        keyedSpans = keyedSpans == null ? List.of() : List.copyOf(keyedSpans);
        if (scratch < 0) throw new IllegalArgumentException("scratch must be >= 0");
    }

    /** How far the stream moves the position counter: every span's advance plus each loop's growth at its cap. */
    public long positions(Map<String, Integer> caps) {
        long n = 0;
        for (PrefixSpan s : spans) {
            n += s.advance();
        }
        return n + grown(caps);
    }

    /** Cache slots the stream writes: every span's length, each loop's growth at its cap, and the scratch slots. */
    public long slots(Map<String, Integer> caps) {
        long n = scratch;
        for (PrefixSpan s : spans) {
            n += s.length();
        }
        return n + grown(caps);
    }

    /** Tokens per iteration of {@code loop} (0 when the stream does not grow in it). */
    public int growthPer(String loop) {
        int n = 0;
        for (LoopGrowth g : growth) {
            if (g.loop().equals(loop)) {
                n += g.tokensPerIteration();
            }
        }
        return n;
    }

    private long grown(Map<String, Integer> caps) {
        long n = 0;
        for (LoopGrowth g : growth) {
            n += (long) caps.getOrDefault(g.loop(), 0) * g.tokensPerIteration();
        }
        return n;
    }

    /**
     * The most pages the stream can hold. Without retention, its slots in whole pages. Under retention
     * the stream is a window: commit leaves less than a page over the budget, so it peaks at the
     * protected prefix plus the budget, or at the prefix rounded up to a page if that is larger; the
     * bound adds a page of overrun and the largest single write past the prefix to that peak, and does
     * not depend on the caps.
     */
    public long pages(Map<String, Integer> caps, int pageSize) {
        if (retention == null) {
            return ceilDiv(slots(caps), pageSize);
        }
        long prefix = retention.protectedPrefix();
        long peak = Math.max(prefix + retention.contextBudget(), ceilDiv(prefix, pageSize) * pageSize);
        return ceilDiv(peak + largestStepPastPrefix(prefix), pageSize) + 1;
    }

    private long largestStepPastPrefix(long prefix) {
        long largest = 0;
        long start = 0;
        for (PrefixSpan s : spans) {
            long end = start + s.length();
            largest = Math.max(largest, end - Math.max(start, Math.min(prefix, end)));
            start = end;
        }
        for (LoopGrowth g : growth) {
            largest = Math.max(largest, g.tokensPerIteration());
        }
        return largest;
    }

    private static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }
}
